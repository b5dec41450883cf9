//! JSON lines: one object a line, each role's field named by the caller (`horde.profile.logs`
//! guesses them from the first lines or takes `--field`). Only the fields named are built; the
//! rest of the object is checked and skipped. A time is epoch seconds, ms or µs (by size), ISO
//! 8601 (a time without an offset is local time) or the common log format's; a duration's unit
//! is the caller's (from the field's name, `--time-unit`, else ms) unless its text says one
//! (`"0.12s"`, `"250ms"`).

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use crate::text::{clf_time, is_method, path_of, split_request, unit_ms, Record};

/// Where a role's value is: a top-level key, then keys of nested objects.
#[derive(Debug, Clone)]
pub struct Field {
    /// The name as given or guessed (shown in reasons).
    pub name: String,
    pub key: String,
    pub nested: Vec<String>,
}

impl Field {
    /// `name` as a top-level key (`nested: false`) or a dotted path into nested objects.
    pub fn new(name: &str, nested: bool) -> Self {
        let mut parts = if nested { name.split('.').map(str::to_string).collect() } else { vec![name.to_string()] };
        let key = parts.remove(0);
        Field { name: name.to_string(), key, nested: parts }
    }
}

/// How a session is told from the JSON: a cookie by name (in a cookie field), or a header field.
#[derive(Debug, Clone)]
pub enum JsonSession {
    ByClient,
    Cookie(String),
    Header(Field),
}

/// The fields of each role (time is required; path or request).
#[derive(Debug, Clone)]
pub struct JsonFields {
    pub time: Field,
    pub method: Option<Field>,
    pub path: Option<Field>,
    pub query: Option<Field>,
    pub request: Option<Field>,
    pub status: Option<Field>,
    pub duration: Option<Field>,
    pub client: Option<Field>,
    pub agent: Option<Field>,
    pub cookie: Option<Field>,
}

/// Parses JSON lines (see the module's text).
pub struct JsonParser {
    fields: JsonFields,
    duration_ms: f64,
    session: JsonSession,
    /// The top-level keys wanted, and each field's index among them.
    keys: Vec<String>,
    /// Per key: whether one field alone reads it, at its top level, so that its value can be
    /// moved out of the line's rather than copied.
    movable: Vec<bool>,
}

/// A reason naming a field (`no time in field 'ts'`).
pub type JsonReason = Cow<'static, str>;

/// Python's `repr()` of a plain name: `'ts'`.
fn quoted_name(name: &str) -> String {
    if name.contains('\'') && !name.contains('"') {
        format!("\"{name}\"")
    } else {
        format!("'{}'", name.replace('\\', "\\\\").replace('\'', "\\'"))
    }
}

struct Wanted<'k>(&'k [String]);

impl<'de> DeserializeSeed<'de> for Wanted<'_> {
    type Value = Option<Vec<Option<Value>>>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Wanted<'_> {
    type Value = Option<Vec<Option<Value>>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = vec![None; self.0.len()];
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match self.0.iter().position(|wanted| *wanted == key) {
                // A repeated key: the last one counts, as Python's json reads it.
                Some(at) => found[at] = Some(map.next_value::<Value>()?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Some(found))
    }
    // Anything else is valid JSON but no object.
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

/// Python's truth of a JSON value.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// A value as text: a string as it is, `True`/`False`, else its JSON.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        other => other.to_string(),
    }
}

/// A time field as Unix seconds: epoch numbers (s, ms or µs by size), ISO 8601, or the common
/// log format's time.
pub fn json_time(value: &Value) -> Option<f64> {
    let number = match value {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => match s.trim().parse::<f64>() {
            Ok(number) => number,
            Err(_) => {
                let iso = if s.contains('T') { Cow::Borrowed(s.as_str()) } else { Cow::Owned(s.replacen(' ', "T", 1)) };
                return iso_time(&iso).or_else(|| clf_time(s));
            }
        },
        _ => return None,
    };
    if !number.is_finite() {
        return None;
    }
    // Epoch seconds reach 1e10 only in the year 2286: bigger numbers are ms, then µs.
    Some(if number > 1e14 {
        number / 1e6
    } else if number > 1e11 {
        number / 1e3
    } else {
        number
    })
}

fn digits_at(text: &[u8], at: usize, n: usize) -> Option<i64> {
    let part = text.get(at..at + n)?;
    part.iter().all(u8::is_ascii_digit).then(|| part.iter().fold(0i64, |v, d| v * 10 + i64::from(d - b'0')))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `HH[:MM[:SS[.f+]]]` (or `HHMMSS`): seconds into the day and microseconds; the rest.
fn clock(text: &[u8]) -> Option<(i64, i64, &[u8])> {
    let hour = digits_at(text, 0, 2)?;
    let (mut minute, mut second, mut at) = (0, 0, 2);
    let extended = text.get(2) == Some(&b':');
    if extended || text.get(2).is_some_and(u8::is_ascii_digit) {
        let skip = usize::from(extended);
        minute = digits_at(text, at + skip, 2)?;
        at += skip + 2;
        if (extended && text.get(at) == Some(&b':')) || (!extended && text.get(at).is_some_and(u8::is_ascii_digit)) {
            second = digits_at(text, at + skip, 2)?;
            at += skip + 2;
        }
    }
    let mut micros = 0;
    if second > 0 || at >= 6 {
        if let Some(b'.' | b',') = text.get(at) {
            let fraction: Vec<u8> = text[at + 1..].iter().take_while(|b| b.is_ascii_digit()).copied().collect();
            if fraction.is_empty() {
                return None;
            }
            at += 1 + fraction.len();
            let mut kept: Vec<u8> = fraction.into_iter().take(6).collect();
            kept.resize(6, b'0');
            micros = kept.iter().fold(0i64, |v, d| v * 10 + i64::from(d - b'0'));
        }
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    Some((hour * 3600 + minute * 60 + second, micros, &text[at..]))
}

/// An ISO 8601 date and time as Python's `datetime.fromisoformat(...).timestamp()` reads the
/// usual forms (`2024-03-01T10:00:00Z`, `...T10:00:00.123+01:00`, a date alone); a time with no
/// offset is local time.
fn iso_time(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    let (year, month, day, rest) = if bytes.get(4) == Some(&b'-') {
        (
            digits_at(bytes, 0, 4)?,
            (bytes.get(7) == Some(&b'-')).then(|| digits_at(bytes, 5, 2))??,
            digits_at(bytes, 8, 2)?,
            &bytes[10..],
        )
    } else {
        (digits_at(bytes, 0, 4)?, digits_at(bytes, 4, 2)?, digits_at(bytes, 6, 2)?, bytes.get(8..)?)
    };
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) || year < 1 {
        return None;
    }
    let (seconds, micros, zone) = match rest {
        [] => (0, 0, rest),
        [_separator, time @ ..] => clock(time)?,
    };
    let offset = match zone {
        [] => None,
        [b'Z'] => Some(0),
        [sign @ (b'+' | b'-'), zone @ ..] => {
            let (hours, minutes) = match zone.len() {
                2 => (digits_at(zone, 0, 2)?, 0),
                4 => (digits_at(zone, 0, 2)?, digits_at(zone, 2, 2)?),
                5 if zone[2] == b':' => (digits_at(zone, 0, 2)?, digits_at(zone, 3, 2)?),
                _ => return None,
            };
            if hours > 23 || minutes > 59 {
                return None;
            }
            Some((hours * 3600 + minutes * 60) * if *sign == b'-' { -1 } else { 1 })
        }
        _ => return None,
    };
    match offset {
        Some(offset) => {
            let days = crate::text::days_from_civil(year, month, day);
            let whole = days * 86_400 + seconds - offset;
            Some((whole * 1_000_000 + micros) as f64 / 1e6)
        }
        None => local_time(year, month, day, seconds).map(|whole| whole + micros as f64 / 1e6),
    }
}

/// Seconds since the epoch of a local date and time (mktime, the machine's time zone).
fn local_time(year: i64, month: i64, day: i64, seconds: i64) -> Option<f64> {
    // SAFETY: a zeroed `tm` is a valid value, and mktime only reads and normalises it.
    #[allow(unsafe_code)]
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        tm.tm_year = i32::try_from(year - 1900).ok()?;
        tm.tm_mon = (month - 1) as i32;
        tm.tm_mday = day as i32;
        tm.tm_hour = (seconds / 3600) as i32;
        tm.tm_min = (seconds / 60 % 60) as i32;
        tm.tm_sec = (seconds % 60) as i32;
        tm.tm_isdst = -1;
        let t = libc::mktime(&mut tm);
        (t != -1).then_some(t as f64)
    }
}

/// `\s*(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(ns|us|µs|ms|s)?\s*`, the whole text: ms, when the
/// text gives no unit `default_ms` a unit.
fn duration_text(text: &str, default_ms: f64) -> Option<f64> {
    let trimmed = text.trim_matches(crate::text::is_space);
    let bytes = trimmed.as_bytes();
    let mut at = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if at == 0 {
        return None;
    }
    if bytes.get(at) == Some(&b'.') {
        let fraction = bytes[at + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
        if fraction > 0 {
            at += 1 + fraction;
        }
    }
    if let Some(b'e' | b'E') = bytes.get(at) {
        let mut exp = at + 1;
        if let Some(b'+' | b'-') = bytes.get(exp) {
            exp += 1;
        }
        let digits = bytes[exp.min(bytes.len())..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits > 0 {
            at = exp + digits;
        }
    }
    let number: f64 = trimmed[..at].parse().ok()?;
    let unit = trimmed[at..].trim_start_matches(crate::text::is_space);
    let scale = match unit {
        "" => default_ms,
        "µs" => 0.001,
        other => unit_ms(other)?,
    };
    Some(number * scale)
}

/// `(?:^|[\s;])NAME=([^;\s]+)` in a cookie header.
fn cookie_value(cookie: &str, name: &str) -> Option<String> {
    let mut from = 0;
    while let Some(found) = cookie[from..].find(name) {
        let at = from + found;
        from = at + 1;
        let before_ok = cookie[..at].chars().next_back().is_none_or(|c| crate::text::is_space(c) || c == ';');
        let Some(value) = cookie[at + name.len()..].strip_prefix('=') else { continue };
        if !before_ok {
            continue;
        }
        let end =
            value.char_indices().find(|&(_, c)| c == ';' || crate::text::is_space(c)).map_or(value.len(), |(i, _)| i);
        if end > 0 {
            return Some(value[..end].to_string());
        }
    }
    None
}

impl JsonParser {
    pub fn new(fields: JsonFields, duration_ms: f64, session: JsonSession) -> Self {
        let mut keys: Vec<String> = Vec::new();
        let header = match &session {
            JsonSession::Header(field) => Some(field),
            _ => None,
        };
        let all = [
            Some(&fields.time),
            fields.method.as_ref(),
            fields.path.as_ref(),
            fields.query.as_ref(),
            fields.request.as_ref(),
            fields.status.as_ref(),
            fields.duration.as_ref(),
            fields.client.as_ref(),
            fields.agent.as_ref(),
            fields.cookie.as_ref(),
            header,
        ];
        let mut readers: Vec<(usize, bool)> = Vec::new();
        for field in all.into_iter().flatten() {
            match keys.iter().position(|key| *key == field.key) {
                Some(at) => readers[at] = (readers[at].0 + 1, readers[at].1 || !field.nested.is_empty()),
                None => {
                    keys.push(field.key.clone());
                    readers.push((1, !field.nested.is_empty()));
                }
            }
        }
        let movable = readers.iter().map(|&(count, nested)| count == 1 && !nested).collect();
        JsonParser { fields, duration_ms, session, keys, movable }
    }

    fn get<'v>(&self, found: &'v [Option<Value>], field: Option<&Field>) -> Option<&'v Value> {
        let field = field?;
        let at = self.keys.iter().position(|key| *key == field.key)?;
        let mut value = found[at].as_ref()?;
        for part in &field.nested {
            value = value.as_object()?.get(part)?;
        }
        (!value.is_null()).then_some(value)
    }

    /// A field's value, moved out of the line's where no other field reads its key.
    fn take(&self, found: &mut [Option<Value>], field: Option<&Field>) -> Option<Value> {
        let key = &field?.key;
        let at = self.keys.iter().position(|known| known == key)?;
        if self.movable[at] {
            return found[at].take().filter(|value| !value.is_null());
        }
        self.get(found, field).cloned()
    }

    pub fn parse<'a>(&self, line: &'a str) -> Result<Record<'a>, JsonReason> {
        let mut deserializer = serde_json::Deserializer::from_str(line);
        let mut found = match Wanted(&self.keys)
            .deserialize(&mut deserializer)
            .and_then(|found| deserializer.end().map(|()| found))
        {
            Ok(Some(found)) => found,
            _ => return Err(Cow::Borrowed("not a JSON object")),
        };
        let f = &self.fields;
        let time_s = self
            .get(&found, Some(&f.time))
            .and_then(json_time)
            .ok_or_else(|| Cow::Owned(format!("no time in field {}", quoted_name(&f.time.name))))?;
        let mut method: Option<String> = match self.take(&mut found, f.method.as_ref()) {
            Some(Value::String(method)) => Some(method),
            _ => None,
        };
        let mut target: Option<String> = None;
        let path_value = self.take(&mut found, f.path.as_ref());
        match path_value {
            Some(Value::String(s)) => target = Some(s),
            Some(_) => {}
            None if f.request.is_some() => {
                let (m, t) = match self.get(&found, f.request.as_ref()) {
                    Some(Value::String(request)) => split_request(request).map_err(Cow::Borrowed)?,
                    _ => return Err(Cow::Borrowed("no request line")),
                };
                method = Some(m.to_string());
                target = Some(t.to_string());
            }
            None => {}
        }
        let target = match target {
            Some(t) if !t.is_empty() => t,
            _ => {
                let name =
                    f.path.as_ref().or(f.request.as_ref()).map_or("None".to_string(), |field| quoted_name(&field.name));
                return Err(Cow::Owned(format!("no path in field {name}")));
            }
        };
        // Most logs hold the path itself: kept as it is; a full URL is cut to its path.
        let mut target = if path_of(&target).len() == target.len() { target } else { path_of(&target).to_string() };
        if !target.starts_with('/') {
            return Err(Cow::Borrowed("the path does not start with '/'"));
        }
        if f.query.is_some() && !target.contains('?') {
            if let Some(Value::String(query)) = self.get(&found, f.query.as_ref()) {
                if !query.is_empty() && query != "-" {
                    target = format!("{target}?{}", query.trim_start_matches('?'));
                }
            }
        }
        let method = match method {
            Some(m) if !m.is_empty() && m.bytes().all(|b| b.is_ascii() && !b.is_ascii_lowercase()) => m,
            Some(m) if !m.is_empty() => m.to_uppercase(),
            _ => "GET".to_string(),
        };
        if !is_method(&method) {
            return Err(Cow::Borrowed("the method is not a word"));
        }
        let status = match self.get(&found, f.status.as_ref()) {
            Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
            Some(Value::String(s)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().unwrap_or(0),
            _ => 0,
        };
        let duration_ms = match self.get(&found, f.duration.as_ref()) {
            Some(Value::Number(n)) => n.as_f64().filter(|v| v.is_finite() && *v >= 0.0).map(|v| v * self.duration_ms),
            Some(Value::String(s)) => duration_text(s, self.duration_ms),
            _ => None,
        };
        let mut text = |field: Option<&Field>| match self.take(&mut found, field).filter(truthy) {
            Some(Value::String(text)) => text,
            Some(other) => text_of(&other),
            None => String::new(),
        };
        let (client, agent) = (text(f.client.as_ref()), text(f.agent.as_ref()));
        let session = match &self.session {
            JsonSession::ByClient => None,
            JsonSession::Cookie(name) => match self.get(&found, f.cookie.as_ref()) {
                Some(Value::Object(cookies)) => cookies.get(name).filter(|v| !v.is_null()).map(text_of),
                Some(Value::String(cookie)) => cookie_value(cookie, name),
                _ => None,
            },
            JsonSession::Header(field) => self
                .get(&found, Some(field))
                .filter(|v| !matches!(v, Value::String(s) if s.is_empty() || s == "-"))
                .map(text_of),
        };
        Ok(Record {
            time_s,
            method: Cow::Owned(method),
            target: Cow::Owned(target),
            status,
            duration_ms,
            client: Cow::Owned(client),
            agent: Cow::Owned(agent),
            session: session.map(Cow::Owned),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(json: &str) -> Option<f64> {
        json_time(&serde_json::from_str(json).unwrap())
    }

    #[test]
    fn times_as_python_reads_them() {
        // Each checked against Python 3.11's datetime.fromisoformat(...).timestamp().
        assert_eq!(time(r#""2024-03-01T10:00:00Z""#), Some(1_709_287_200.0));
        assert_eq!(time(r#""2024-03-01T10:00:00.5Z""#), Some(1_709_287_200.5));
        assert_eq!(time(r#""2024-03-01T10:00:00.1234567+01:00""#), Some(1_709_283_600.123456));
        assert_eq!(time(r#""2024-03-01 10:00:00,25Z""#), Some(1_709_287_200.25));
        assert_eq!(time(r#""20240301T100000Z""#), Some(1_709_287_200.0));
        assert_eq!(time(r#""2024-03-01T10:00:00+0100""#), Some(1_709_283_600.0));
        assert_eq!(time(r#""2024-03-01T10Z""#), Some(1_709_287_200.0));
        assert_eq!(time(r#""01/Mar/2024:10:00:00 +0000""#), Some(1_709_287_200.0));
        assert_eq!(time("1709287200123"), Some(1_709_287_200.123));
        assert_eq!(time("1709287200123456"), Some(1_709_287_200.123456));
        assert_eq!(time(r#"" 1709287200 ""#), Some(1_709_287_200.0));
        assert_eq!(time(r#""x""#), None);
        assert_eq!(time("true"), None);
        assert_eq!(time(r#""2024-02-30T10:00:00Z""#), None);
        assert_eq!(time(r#""inf""#), None);
    }

    #[test]
    fn durations_in_text_carry_their_unit() {
        assert_eq!(duration_text("0.25s", 1.0), Some(250.0));
        assert_eq!(duration_text(" 250 ms ", 1.0), Some(250.0));
        assert_eq!(duration_text("3", 1000.0), Some(3000.0));
        assert_eq!(duration_text("1e3µs", 1.0), Some(1.0));
        assert_eq!(duration_text("-", 1.0), None);
        assert_eq!(duration_text("5 minutes", 1.0), None);
    }
}
