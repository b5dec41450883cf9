//! Random and mutated lines through the reader, the combined parser and the templater: no panic,
//! every line either a request or a bad line with its number and reason, and a bad line's number
//! naming the line that failed for that reason.

use std::io::Write;

use horde_logs::profile::{profile, Format, Options, LONG_LINE};
use horde_logs::template::{Rules, Templated, Templater};
use horde_logs::text::{split_request, TextParser};

/// xorshift64*: a fixed stream, so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

struct AnyRules;

impl Rules for AnyRules {
    fn is_secret_parameter(&mut self, name: &str) -> bool {
        name.to_lowercase().contains("token")
    }
    fn names_a_secret(&mut self, segment: &str) -> bool {
        self.is_secret_parameter(segment)
    }
    fn has_email(&mut self, text: &str) -> bool {
        text.contains('@')
    }
}

const SEEDS: [&str; 5] = [
    r#"10.0.0.1 - - [01/Mar/2024:10:00:00 +0000] "GET /api/items/42?page=2&token=abc HTTP/1.1" 200 512 "-" "Mozilla/5.0" 0.040 0.036"#,
    r#"::1 - bob [10/Oct/2000:13:55:36 -0700] "POST http://h.example/reset-token/XYZ/a.3f9a0c7be1.js HTTP/1.0" 500 0 "ref" "a\"b" rt=0.2 urt=0.1 sid=abc"#,
    r#"1.2.3.4 - - [31/Dec/1999:23:59:59 +1400] "DELETE /u/bob%40example.org/k/qZkTwRbXmPvLsNdH?a[]=1&a[]=2&=x&%=3 HTTP/2.0" - - 1500"#,
    r#"h - - [01/Mar/2024:10:00:00] "-" 400 0 "-" "-""#,
    r#"é - - [01/Mar/2024:10:00:00 +0000] "GET /ünï/123e4567-e89b-12d3-a456-426614174000 HTTP/1.1" 200 1 "" "ü" 12"#,
];
const PIECES: [&str; 14] =
    [" ", "\"", "\\", "[", "]", "/", "?", "&", "=", "é", "\u{0}", "99999999999999999999999999", ".", "\u{1f600}"];

fn mutated(rng: &mut Rng) -> String {
    let mut line = SEEDS[rng.below(SEEDS.len())].to_string();
    for _ in 0..1 + rng.below(6) {
        let mut at = rng.below(line.len() + 1);
        while !line.is_char_boundary(at) {
            at -= 1;
        }
        match rng.below(4) {
            0 => line.insert_str(at, PIECES[rng.below(PIECES.len())]),
            1 => line.truncate(at),
            2 => {
                let mut end = (at + 1 + rng.below(8)).min(line.len());
                while !line.is_char_boundary(end) {
                    end += 1;
                }
                line.replace_range(at..end, "");
            }
            _ => {
                let other = SEEDS[rng.below(SEEDS.len())];
                let mut from = rng.below(other.len());
                while !other.is_char_boundary(from) {
                    from -= 1;
                }
                line.insert_str(at, &other[from..]);
            }
        }
    }
    line
}

#[test]
fn mutated_lines_parse_or_give_a_reason_and_template_without_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut parser = TextParser::new(false, None, Some("sid".into()));
    let mut templater = Templater::new(AnyRules);
    let mut out = Templated::default();
    let (mut ok, mut bad) = (0, 0);
    for _ in 0..200_000 {
        let line = mutated(&mut rng);
        match parser.parse(&line) {
            Ok(record) => {
                ok += 1;
                assert!(record.target.starts_with('/'), "{line}");
                assert!(split_request(&format!("{} {} HTTP/1.1", record.method, record.target)).is_ok(), "{line}");
                assert!(record.time_s.is_finite(), "{line}");
                templater.template(&record.method, &record.target, &mut out);
                let shape = out.shape(&record.method, &record.target);
                assert_eq!(shape.slots.len(), out.values.len(), "{line}");
                for (a, b) in out.values.iter().flatten() {
                    assert!(record.target.get(*a..*b).is_some(), "{line}");
                }
            }
            Err(reason) => {
                bad += 1;
                assert!(!reason.is_empty());
            }
        }
    }
    assert!(ok > 10_000 && bad > 10_000, "{ok} parsed, {bad} not: the mutations should do both");
}

#[test]
fn every_line_of_a_mutated_file_is_counted_and_bad_lines_are_located() {
    let mut rng = Rng(42);
    let path = std::env::temp_dir().join(format!("horde-logs-fuzz-{}.log", std::process::id()));
    let mut lines: Vec<Vec<u8>> = Vec::new();
    for i in 0..20_000 {
        let mut line = if i % 3 == 0 { SEEDS[0].as_bytes().to_vec() } else { mutated(&mut rng).into_bytes() };
        match rng.below(200) {
            0 => line.push(0xFF),                                // not UTF-8: read with U+FFFD
            1 => line.extend(std::iter::repeat_n(b'x', 70_000)), // past the 64 KiB limit
            2 => line.push(b'\r'),
            _ => {}
        }
        line.retain(|&b| b != b'\n');
        lines.push(line);
    }
    let mut file = std::fs::File::create(&path).unwrap();
    for line in &lines {
        file.write_all(line).unwrap();
        file.write_all(b"\n").unwrap();
    }
    drop(file);
    let format = Format::Text { nginx: false, time_unit_ms: None, session_name: None };
    let options =
        Options { format, templates: Vec::new(), keyed_sessions: false, session_gap_s: 1800.0, max_endpoints: 50 };
    let aggregate = profile(std::slice::from_ref(&path), &options, AnyRules, |_| Ok::<(), ()>(())).unwrap();
    std::fs::remove_file(&path).unwrap();
    let counts = &aggregate.counts;
    assert_eq!(counts.lines, lines.len() as u64);
    let blank = lines.iter().filter(|l| String::from_utf8_lossy(l).trim().is_empty()).count() as u64;
    assert_eq!(counts.records + counts.bad + blank, counts.lines);
    let counted: u64 = aggregate.endpoints.iter().chain(aggregate.other.as_ref()).map(|e| e.count).sum();
    assert_eq!(counted, counts.records);
    // Each endpoint's requests per minute add up to its count, one entry per minute it had any,
    // and over the endpoints to the log's per minute (the mutated times span many minutes).
    let mut by_minute: std::collections::HashMap<i64, u64> = std::collections::HashMap::new();
    for endpoint in aggregate.endpoints.iter().chain(aggregate.other.as_ref()) {
        assert_eq!(endpoint.per_minute.iter().map(|&(_, n)| n).sum::<u64>(), endpoint.count);
        let minutes: std::collections::HashSet<i64> = endpoint.per_minute.iter().map(|&(m, _)| m).collect();
        assert_eq!(minutes.len(), endpoint.per_minute.len());
        assert!(endpoint.per_minute.iter().all(|&(_, n)| n > 0));
        for &(minute, n) in &endpoint.per_minute {
            *by_minute.entry(minute).or_insert(0) += n;
        }
    }
    assert!(aggregate.per_minute.len() > 1);
    assert_eq!(by_minute, aggregate.per_minute.iter().copied().collect());
    let mut parser = TextParser::new(false, None, None);
    for sample in &counts.bad_samples {
        let line = &lines[sample.line as usize - 1];
        if line.len() > 65_536 {
            assert_eq!(sample.reason, LONG_LINE);
        } else {
            let text = String::from_utf8_lossy(line);
            let text = text.trim_end_matches('\r');
            assert_eq!(parser.parse(text).err(), Some(sample.reason.as_str()), "line {}", sample.line);
        }
    }
}

const JSON_SEEDS: [&str; 3] = [
    r#"{"ts": "2024-03-01T10:00:00.123Z", "method": "get", "uri": "/api/items/42", "args": "page=2", "status": 200, "duration_ms": 12.5, "remote_addr": "10.0.0.1", "http_user_agent": "Mozilla", "http_cookie": "sid=abc; lang=en"}"#,
    r#"{"ts": 1709287200123, "request": "POST /a/b?x=1 HTTP/1.1", "status": "503", "duration_ms": "0.25s", "http": {"verb": "PUT"}, "http_cookie": {"sid": 7}}"#,
    r#"{"ts": "01/Mar/2024:10:00:00 +0000", "uri": "http://h/x", "status": true, "duration_ms": -1, "remote_addr": 0, "http_user_agent": ["a"]}"#,
];

#[test]
fn mutated_json_lines_parse_or_give_a_reason() {
    use horde_logs::json::{Field, JsonFields, JsonParser, JsonSession};
    let field = |name: &str| Some(Field::new(name, false));
    let fields = JsonFields {
        time: Field::new("ts", false),
        method: field("method"),
        path: field("uri"),
        query: field("args"),
        request: field("request"),
        status: field("status"),
        duration: field("duration_ms"),
        client: field("remote_addr"),
        agent: field("http_user_agent"),
        cookie: field("http_cookie"),
    };
    let parser = JsonParser::new(fields, 1.0, JsonSession::Cookie("sid".into()));
    let mut rng = Rng(7);
    let (mut ok, mut bad) = (0, 0);
    for _ in 0..100_000 {
        let seed = JSON_SEEDS[rng.below(JSON_SEEDS.len())];
        let mut line = seed.to_string();
        for _ in 0..rng.below(4) {
            let mut at = rng.below(line.len() + 1);
            while !line.is_char_boundary(at) {
                at -= 1;
            }
            match rng.below(3) {
                0 => line.insert_str(at, PIECES[rng.below(PIECES.len())]),
                1 => line.truncate(at),
                _ => line.insert_str(at, ["{", "}", ",", ":", "\"", "[", "1e999", "null", "\"\\ud800\""][rng.below(9)]),
            }
        }
        match parser.parse(&line) {
            Ok(record) => {
                ok += 1;
                assert!(record.target.starts_with('/') && record.time_s.is_finite(), "{line}");
                assert!(record.duration_ms.is_none_or(|ms| ms >= 0.0), "{line}");
            }
            Err(reason) => {
                bad += 1;
                assert!(!reason.is_empty());
            }
        }
    }
    assert!(ok > 5_000 && bad > 5_000, "{ok} parsed, {bad} not");
}
