//! The combined format (Apache/nginx: `%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"`,
//! with whatever the site appended after it), one line at a time. A request's time is taken
//! from `rt=`/`request_time=` (seconds) or `urt=`/`upstream_response_time=` pairs when present,
//! else from the first bare number after the user agent: with a decimal point it is seconds
//! (nginx's `$request_time` always has one), a whole number is microseconds (Apache's `%D`) for
//! `combined` and seconds for `nginx` (a format that logs `$request_time` rounded, or `%T`).

/// One request as a line tells it (borrowed from a text line; a JSON line's values are built).
#[derive(Debug, Clone, PartialEq)]
pub struct Record<'a> {
    /// Unix seconds; for nginx and Apache, when the response was logged.
    pub time_s: f64,
    pub method: Cow<'a, str>,
    /// The path with its query string, as requested.
    pub target: Cow<'a, str>,
    /// 0 when the log has none.
    pub status: i64,
    pub duration_ms: Option<f64>,
    pub client: Cow<'a, str>,
    pub agent: Cow<'a, str>,
    /// The named cookie's or header's value, when sessions are keyed by one.
    pub session: Option<Cow<'a, str>>,
}

use std::borrow::Cow;

/// Why a line is no request (shown with its number).
pub type Reason = &'static str;

pub const NOT_COMBINED: Reason = "not the combined format";
pub const BAD_TIME: Reason = "the time is not [day/Mon/year:hh:mm:ss zone]";
pub const NO_REQUEST_LINE: Reason = "no request line (METHOD PATH PROTOCOL)";
pub const NO_METHOD: Reason = "the request does not start with a method";
pub const NOT_A_PATH: Reason = "the request's target is not a path";

/// Whitespace as Python's `str.isspace` (and `\s` of a `str` pattern) has it.
pub fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// The parser of `combined` (`nginx: false`) or `nginx` lines.
pub struct TextParser {
    decimal_ms: f64,
    whole_ms: f64,
    /// The session cookie's or header's name (`NAME=value` after the agent), if any.
    session: Option<String>,
    last_time_text: String,
    last_time: f64,
}

/// Milliseconds per unit (`s`, `ms`, `us`, `ns`).
pub fn unit_ms(unit: &str) -> Option<f64> {
    Some(match unit {
        "s" => 1000.0,
        "ms" => 1.0,
        "us" => 0.001,
        "ns" => 0.000001,
        _ => return None,
    })
}

impl TextParser {
    /// `time_unit`: the unit of a bare number after the agent, given (`None`: by format).
    pub fn new(nginx: bool, time_unit: Option<f64>, session: Option<String>) -> Self {
        TextParser {
            decimal_ms: time_unit.unwrap_or(1000.0),
            whole_ms: time_unit.unwrap_or(if nginx { 1000.0 } else { 0.001 }),
            session,
            last_time_text: String::new(),
            last_time: 0.0,
        }
    }

    pub fn parse<'a>(&mut self, line: &'a str) -> Result<Record<'a>, Reason> {
        let fields = split_combined(line).ok_or(NOT_COMBINED)?;
        let (method, target) = split_request(fields.request)?;
        if fields.time != self.last_time_text {
            self.last_time = clf_time(fields.time).ok_or(BAD_TIME)?;
            self.last_time_text.clear();
            self.last_time_text.push_str(fields.time);
        }
        let status = fields.status.parse::<i64>().unwrap_or(0);
        let session = self.session.as_deref().and_then(|name| session_value(fields.tail, name));
        let duration_ms = if fields.tail.is_empty() { None } else { self.duration(fields.tail) };
        Ok(Record {
            time_s: self.last_time,
            method: Cow::Borrowed(method),
            target: Cow::Borrowed(target),
            status,
            duration_ms,
            client: Cow::Borrowed(fields.client),
            agent: Cow::Borrowed(fields.agent.unwrap_or("")),
            session: session.map(Cow::Borrowed),
        })
    }

    fn duration(&self, tail: &str) -> Option<f64> {
        if tail.contains('=') || tail.contains(':') {
            if let Some(ms) = time_pairs(tail) {
                return Some(ms);
            }
        }
        let number = bare_number(tail)?;
        let value: f64 = number.parse().ok()?;
        Some(value * if number.contains('.') { self.decimal_ms } else { self.whole_ms })
    }
}

struct Fields<'a> {
    client: &'a str,
    time: &'a str,
    request: &'a str,
    status: &'a str,
    agent: Option<&'a str>,
    tail: &'a str,
}

/// `\S+` at the start of `text`: its length in bytes (0 when none).
fn non_space(text: &str) -> usize {
    text.char_indices().find(|&(_, c)| is_space(c)).map_or(text.len(), |(at, _)| at)
}

/// A quoted field (`"..."` with `\x` escapes) at the start of `text`: its inside and the rest.
fn quoted(text: &str) -> Option<(&str, &str)> {
    let body = text.strip_prefix('"')?;
    let bytes = body.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => return Some((&body[..at], &body[at + 1..])),
            // An escape takes the next character whole (a multi-byte one too), but not a break.
            b'\\' => {
                let next = body[at + 1..].chars().next()?;
                if next == '\n' {
                    return None;
                }
                at += 1 + next.len_utf8();
            }
            _ => at += 1,
        }
    }
    None
}

/// `(\S+) \S+ \S+ \[([^\]]+)\] "(request)" (\d{3}|-) \S+(?: "(referer)" "(agent)")?(.*)`
fn split_combined(line: &str) -> Option<Fields<'_>> {
    let n = non_space(line);
    if n == 0 {
        return None;
    }
    let client = &line[..n];
    let mut rest = line[n..].strip_prefix(' ')?;
    for _ in 0..2 {
        let n = non_space(rest);
        if n == 0 {
            return None;
        }
        rest = rest[n..].strip_prefix(' ')?;
    }
    rest = rest.strip_prefix('[')?;
    let close = rest.find(']')?;
    if close == 0 {
        return None;
    }
    let time = &rest[..close];
    rest = rest[close + 1..].strip_prefix(' ')?;
    let (request, after) = quoted(rest)?;
    rest = after.strip_prefix(' ')?;
    let status = if rest.starts_with('-') {
        "-"
    } else if rest.len() >= 3 && rest.as_bytes()[..3].iter().all(u8::is_ascii_digit) {
        &rest[..3]
    } else {
        return None;
    };
    rest = rest[status.len()..].strip_prefix(' ')?;
    let n = non_space(rest);
    if n == 0 {
        return None;
    }
    rest = &rest[n..];
    let mut agent = None;
    let referer_and_agent = rest.strip_prefix(' ').and_then(quoted).and_then(|(_referer, after)| {
        let after = after.strip_prefix(' ')?;
        quoted(after)
    });
    if let Some((found, after)) = referer_and_agent {
        agent = Some(found);
        rest = after;
    }
    // `.*` stops at a line break (only a lone `\r` inside a line can be one here).
    let tail = rest.find('\n').map_or(rest, |at| &rest[..at]);
    Some(Fields { client, time, request, status, agent, tail })
}

/// `[A-Z][A-Z_-]{0,19}`, the whole text.
pub fn is_method(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 20
        && bytes[0].is_ascii_uppercase()
        && bytes[1..].iter().all(|&b| b.is_ascii_uppercase() || b == b'_' || b == b'-')
}

/// (method, target) of a request line, or why it is not one.
pub fn split_request(request: &str) -> Result<(&str, &str), Reason> {
    let (method, rest) = request.split_once(' ').unwrap_or((request, ""));
    if !is_method(method) {
        return Err(if request.is_empty() || request == "-" { NO_REQUEST_LINE } else { NO_METHOD });
    }
    let target = match rest.rsplit_once(' ') {
        Some((target, protocol)) if protocol.starts_with("HTTP/") => target,
        _ => rest, // HTTP/0.9, or a line the server cut
    };
    let target = path_of(target);
    if !target.starts_with('/') {
        return Err(NOT_A_PATH);
    }
    Ok((method, target))
}

/// The path and query of a request's target: a request to a proxy names the whole URL.
pub fn path_of(target: &str) -> &str {
    if target.starts_with("http://") || target.starts_with("https://") {
        let host = target.find("//").map_or(0, |at| at + 2);
        return target[host..].find('/').map_or("/", |at| &target[host + at..]);
    }
    target
}

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

fn digits(text: &[char], from: usize, to: usize) -> Option<i64> {
    let part = text.get(from..to)?;
    if part.is_empty() || !part.iter().all(char::is_ascii_digit) {
        return None;
    }
    Some(part.iter().fold(0i64, |n, c| n * 10 + (*c as i64 - '0' as i64)))
}

/// Days from 1970-01-01 to a proleptic Gregorian date (month 1..=12; the day not checked, as
/// `calendar.timegm` does not).
pub(crate) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468 + (day - 1)
}

/// A common-log-format time (`10/Oct/2000:13:55:36 -0700`) as Unix seconds; no zone is UTC.
pub fn clf_time(text: &str) -> Option<f64> {
    let chars: Vec<char> = text.chars().take(26).collect();
    let day = digits(&chars, 0, 2)?;
    let month_text: String = chars.get(3..6)?.iter().collect();
    let month = MONTHS.iter().position(|m| *m == month_text)? as i64 + 1;
    let year = digits(&chars, 7, 11)?;
    if !(1..=9999).contains(&year) || chars.get(17) != Some(&':') {
        return None;
    }
    let hour = digits(&chars, 12, 14)?;
    let minute = digits(&chars, 15, 17)?;
    let second = digits(&chars, 18, 20)?;
    let offset = if chars.len() >= 26 {
        let sign = if chars[21] == '-' { -1 } else { 1 };
        (digits(&chars, 22, 24)? * 3600 + digits(&chars, 24, 26)? * 60) * sign
    } else {
        0
    };
    let days = days_from_civil(year, month, day);
    Some((days * 86_400 + hour * 3600 + minute * 60 + second - offset) as f64)
}

/// `\d+(?:\.\d+)?` at the start of `text`: its length.
fn number_at(text: &[u8]) -> usize {
    let whole = text.iter().take_while(|b| b.is_ascii_digit()).count();
    if whole == 0 {
        return 0;
    }
    if text.get(whole) == Some(&b'.') {
        let fraction = text[whole + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
        if fraction > 0 {
            return whole + 1 + fraction;
        }
    }
    whole
}

/// The `rt=`, `request_time=`, `urt=` or `upstream_response_time=` pair's time (seconds, as ms),
/// the first name of those present; the last pair of a name counts.
fn time_pairs(tail: &str) -> Option<f64> {
    const NAMES: [&str; 4] = ["rt", "request_time", "urt", "upstream_response_time"];
    let bytes = tail.as_bytes();
    let mut found: [Option<&str>; 4] = [None; 4];
    for at in 0..bytes.len() {
        if at > 0 && !matches!(bytes[at - 1], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0x1c..=0x1f | b',' | b';') {
            continue;
        }
        for (index, name) in NAMES.iter().enumerate() {
            let Some(after) = bytes[at..].strip_prefix(name.as_bytes()) else { continue };
            let Some((&separator, after)) = after.split_first() else { continue };
            if separator != b'=' && separator != b':' {
                continue;
            }
            let after = after.strip_prefix(b"\"").unwrap_or(after);
            let n = number_at(after);
            if n > 0 {
                let start = tail.len() - after.len();
                found[index] = Some(&tail[start..start + n]);
                break;
            }
        }
    }
    let text = found.iter().flatten().next()?;
    text.parse::<f64>().ok().map(|seconds| seconds * 1000.0)
}

/// The first `(?:^|\s)(\d+(?:\.\d+)?)(?=\s|$)` of the tail.
fn bare_number(tail: &str) -> Option<&str> {
    let bytes = tail.as_bytes();
    let mut previous_space = true;
    let mut at = 0;
    while at < bytes.len() {
        if previous_space && bytes[at].is_ascii_digit() {
            let n = number_at(&bytes[at..]);
            let next = tail[at + n..].chars().next();
            if next.is_none_or(is_space) {
                return Some(&tail[at..at + n]);
            }
        }
        let c = tail[at..].chars().next()?;
        previous_space = is_space(c);
        at += c.len_utf8();
    }
    None
}

/// `(?:^|[\s;"])NAME=([^;"\s&]+)`: a session cookie's or header's value after the agent.
fn session_value<'a>(tail: &'a str, name: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(found) = tail[from..].find(name) {
        let at = from + found;
        from = at + 1;
        let before_ok = tail[..at].chars().next_back().is_none_or(|c| is_space(c) || c == ';' || c == '"');
        let Some(value) = tail[at + name.len()..].strip_prefix('=') else { continue };
        if !before_ok {
            continue;
        }
        let end = value
            .char_indices()
            .find(|&(_, c)| c == ';' || c == '"' || c == '&' || is_space(c))
            .map_or(value.len(), |(i, _)| i);
        if end > 0 {
            return Some(&value[..end]);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parser() -> TextParser {
        TextParser::new(false, None, Some("sid".into()))
    }

    #[test]
    fn a_combined_line_with_times_after_the_agent() {
        let line = r#"10.0.0.1 - - [01/Mar/2024:10:00:00 +0000] "GET /items/1?page=2 HTTP/1.1" 200 512 "-" "Mozilla/5.0" 0.040 0.036"#;
        let record = parser().parse(line).unwrap();
        assert_eq!(record.time_s, 1_709_287_200.0);
        assert_eq!(
            (&*record.method, &*record.target, record.status, &*record.client, &*record.agent),
            ("GET", "/items/1?page=2", 200, "10.0.0.1", "Mozilla/5.0")
        );
        assert_eq!(record.duration_ms, Some(40.0));
    }

    #[test]
    fn time_units_pairs_and_zones() {
        let base = r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "POST http://h.example/a/b HTTP/1.0" - 0 "r" "a""#;
        let mut p = parser();
        assert_eq!(p.parse(base).unwrap().time_s, 971_211_336.0);
        assert_eq!(p.parse(base).unwrap().target, "/a/b");
        assert_eq!(p.parse(base).unwrap().status, 0);
        assert_eq!(p.parse(&format!("{base} 1500")).unwrap().duration_ms, Some(1.5));
        assert_eq!(TextParser::new(true, None, None).parse(&format!("{base} 2")).unwrap().duration_ms, Some(2000.0));
        assert_eq!(p.parse(&format!("{base} urt=0.2 rt=0.3 sid=abc; x")).unwrap().duration_ms, Some(300.0));
        assert_eq!(p.parse(&format!("{base} urt=0.2 rt=0.3 sid=abc; x")).unwrap().session.as_deref(), Some("abc"));
        assert_eq!(p.parse(&format!("{base} 12abc")).unwrap().duration_ms, None);
    }

    #[test]
    fn bad_lines_say_why() {
        let mut p = parser();
        assert_eq!(p.parse("junk"), Err(NOT_COMBINED));
        assert_eq!(p.parse(r#"a - - [01/Xyz/2024:10:00:00 +0000] "GET / HTTP/1.1" 200 1"#), Err(BAD_TIME));
        assert_eq!(p.parse(r#"a - - [01/Mar/2024:10:00:00 +0000] "-" 400 1"#), Err(NO_REQUEST_LINE));
        assert_eq!(p.parse(r#"a - - [01/Mar/2024:10:00:00 +0000] "get / HTTP/1.1" 400 1"#), Err(NO_METHOD));
        assert_eq!(p.parse(r#"a - - [01/Mar/2024:10:00:00 +0000] "GET x HTTP/1.1" 400 1"#), Err(NOT_A_PATH));
        assert_eq!(
            p.parse(r#"a - - [01/Mar/2024:10:00:00 +0000] "GET /\"q HTTP/1.1" 200 1"#).unwrap().target,
            r#"/\"q"#
        );
    }
}
