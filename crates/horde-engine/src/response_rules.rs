//! What a step does with a response: extractors (values into VU variables) and checks.

mod json_scope;

pub(crate) use json_scope::JsonScope;

use crate::error::EngineError;
use crate::time::think::VuRandom;
use horde_plan::{Check, ExtractFrom, Extractor, Pick};
use minijinja::Value;
use serde_json_path::JsonPath;

/// The parts of a response that extractors and checks read.
pub(crate) struct ResponseView<'a> {
    pub status: u16,
    pub body: &'a [u8],
    pub headers: &'a [(String, String)],
    /// What of the body the step's JSON extractors and checks read.
    scope: &'a JsonScope,
    /// The body parsed as JSON (as far as `scope` reaches), once, on first use (`None` inside:
    /// not JSON).
    parsed: Option<Option<serde_json::Value>>,
}

impl<'a> ResponseView<'a> {
    pub fn new(status: u16, body: &'a [u8], headers: &'a [(String, String)], scope: &'a JsonScope) -> Self {
        Self { status, body, headers, scope, parsed: None }
    }

    fn json(&mut self) -> Option<&serde_json::Value> {
        let (body, scope) = (self.body, self.scope);
        self.parsed.get_or_insert_with(|| scope.parse(body)).as_ref()
    }
}

enum Source {
    /// The path, and the expression it was parsed from (`JsonScope::of` reads the text).
    Json(JsonPath, String),
    Regex(regex::bytes::Regex),
    Header(String),
    Status,
}

/// An extractor, compiled.
pub(crate) struct CompiledExtractor {
    pub var: String,
    /// The extractor in words, for the error detail: `json $.token`.
    pub description: String,
    source: Source,
    pick: Pick,
    default: Option<Value>,
}

impl std::fmt::Debug for CompiledExtractor {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("CompiledExtractor").field("var", &self.var).finish()
    }
}

fn setup_error(what: &str, error: impl std::fmt::Display) -> EngineError {
    EngineError::Setup(format!("{what}: {error}"))
}

impl CompiledExtractor {
    pub fn compile(extractor: &Extractor) -> Result<Self, EngineError> {
        let expression = || extractor.expression.clone().unwrap_or_default();
        let source = match extractor.from {
            ExtractFrom::Json => {
                let expression = expression();
                Source::Json(JsonPath::parse(&expression).map_err(|e| setup_error("invalid JSONPath", e))?, expression)
            }
            ExtractFrom::Regex => Source::Regex(
                regex::bytes::Regex::new(&expression()).map_err(|e| setup_error("invalid regular expression", e))?,
            ),
            ExtractFrom::Header => Source::Header(expression()),
            ExtractFrom::Status => Source::Status,
        };
        let from = match extractor.from {
            ExtractFrom::Json => "json",
            ExtractFrom::Regex => "regex",
            ExtractFrom::Header => "header",
            ExtractFrom::Status => "status",
        };
        Ok(Self {
            var: extractor.var.clone(),
            description: format!("{from} {}", expression()).trim_end().to_owned(),
            source,
            pick: extractor.pick,
            default: extractor.default.as_ref().map(Value::from_serialize),
        })
    }

    pub fn needs_body(&self) -> bool {
        matches!(self.source, Source::Json(..) | Source::Regex(_))
    }

    /// Its JSONPath as written, for a JSON extractor (`JsonScope::of`).
    pub fn json_expression(&self) -> Option<&str> {
        match &self.source {
            Source::Json(_, expression) => Some(expression),
            _ => None,
        }
    }

    pub fn needs_headers(&self) -> bool {
        matches!(self.source, Source::Header(_))
    }

    /// The value to set, or `None` when nothing matched and there is no default.
    pub fn extract(&self, response: &mut ResponseView<'_>, random: &mut VuRandom) -> Option<Value> {
        let found: Vec<Value> = match &self.source {
            Source::Json(path, _) => match response.json() {
                Some(document) => path.query(document).all().into_iter().map(Value::from_serialize).collect(),
                None => Vec::new(),
            },
            Source::Regex(pattern) => pattern
                .captures_iter(response.body)
                .map(|captures| {
                    let matched = captures.get(1).or_else(|| captures.get(0)).map(|m| m.as_bytes()).unwrap_or_default();
                    Value::from(String::from_utf8_lossy(matched).into_owned())
                })
                .collect(),
            Source::Header(name) => response
                .headers
                .iter()
                .filter(|(header, _)| header.eq_ignore_ascii_case(name))
                .map(|(_, value)| Value::from(value.as_str()))
                .collect(),
            Source::Status => vec![Value::from(response.status)],
        };
        let picked = match self.pick {
            Pick::All if !found.is_empty() => Some(Value::from(found)),
            Pick::All => None,
            Pick::First => found.into_iter().next(),
            Pick::Random if found.is_empty() => None,
            Pick::Random => {
                let index = (random.next_u64() % found.len() as u64) as usize;
                found.into_iter().nth(index)
            }
        };
        picked.or_else(|| self.default.clone())
    }
}

/// A check, compiled.
pub(crate) enum CompiledCheck {
    Status(Vec<u16>),
    Json { path: JsonPath, expression: String, equals: Option<serde_json::Value> },
    BodyContains(Vec<u8>),
    BodyMatches(regex::bytes::Regex),
}

impl std::fmt::Debug for CompiledCheck {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            CompiledCheck::Status(_) => "Status",
            CompiledCheck::Json { .. } => "Json",
            CompiledCheck::BodyContains(_) => "BodyContains",
            CompiledCheck::BodyMatches(_) => "BodyMatches",
        })
    }
}

impl CompiledCheck {
    pub fn compile(check: &Check) -> Result<Self, EngineError> {
        Ok(match check {
            Check::Status { allowed } => CompiledCheck::Status(allowed.clone()),
            Check::Json { expression, equals } => CompiledCheck::Json {
                path: JsonPath::parse(expression).map_err(|e| setup_error("invalid JSONPath", e))?,
                expression: expression.clone(),
                equals: equals.clone(),
            },
            Check::BodyContains { text } => CompiledCheck::BodyContains(text.as_bytes().to_vec()),
            Check::BodyMatches { pattern } => CompiledCheck::BodyMatches(
                regex::bytes::Regex::new(pattern).map_err(|e| setup_error("invalid regular expression", e))?,
            ),
        })
    }

    pub fn needs_body(&self) -> bool {
        !matches!(self, CompiledCheck::Status(_))
    }

    /// Its JSONPath as written, for a JSON check (`JsonScope::of`).
    pub fn json_expression(&self) -> Option<&str> {
        match self {
            CompiledCheck::Json { expression, .. } => Some(expression),
            _ => None,
        }
    }

    pub fn passes(&self, response: &mut ResponseView<'_>) -> bool {
        match self {
            CompiledCheck::Status(allowed) => allowed.contains(&response.status),
            CompiledCheck::Json { path, equals, .. } => match response.json() {
                None => false,
                Some(document) => {
                    let found = path.query(document).all();
                    match equals {
                        None => !found.is_empty(),
                        Some(expected) => found.first().is_some_and(|value| json_equal(value, expected)),
                    }
                }
            },
            CompiledCheck::BodyContains(text) => {
                response.body.windows(text.len()).any(|window| window == text.as_slice())
            }
            CompiledCheck::BodyMatches(pattern) => pattern.is_match(response.body),
        }
    }
}

/// A check in words, as the checks summary names it: `status in [200, 201]`,
/// `json $.ok == true`, `body contains "name"`, `body matches /id: \d+/`.
pub(crate) fn check_label(check: &Check) -> String {
    match check {
        Check::Status { allowed } => {
            format!("status in [{}]", allowed.iter().map(u16::to_string).collect::<Vec<_>>().join(", "))
        }
        Check::Json { expression, equals: None } => format!("json {expression} exists"),
        Check::Json { expression, equals: Some(value) } => format!("json {expression} == {value}"),
        Check::BodyContains { text } => format!("body contains {text:?}"),
        Check::BodyMatches { pattern } => format!("body matches /{pattern}/"),
    }
}

impl CompiledCheck {
    /// Why the check failed on `response`, with what was expected and what was found: the
    /// error detail. Called on a failure only.
    pub fn failure(&self, response: &mut ResponseView<'_>) -> String {
        match self {
            CompiledCheck::Status(allowed) => format!("status {} not in {allowed:?}", response.status),
            CompiledCheck::Json { path, expression, equals } => {
                let found =
                    response.json().map(|document| path.query(document).all().first().map(|value| value.to_string()));
                match (found, equals) {
                    (None, _) => format!("json {expression}: the body is not JSON ({})", body_prefix(response.body)),
                    (Some(None), _) => format!("json {expression}: found nothing"),
                    (Some(Some(found)), Some(expected)) => {
                        format!("json {expression}: expected {expected}, found {found}")
                    }
                    (Some(Some(found)), None) => format!("json {expression}: found {found}"),
                }
            }
            CompiledCheck::BodyContains(text) => {
                format!("body does not contain {:?} ({})", String::from_utf8_lossy(text), body_prefix(response.body))
            }
            CompiledCheck::BodyMatches(pattern) => {
                format!("body does not match /{}/ ({})", pattern.as_str(), body_prefix(response.body))
            }
        }
    }
}

/// The start of a body, as text, for an error detail.
pub(crate) fn body_prefix(body: &[u8]) -> String {
    const SHOWN: usize = 80;
    if body.is_empty() {
        return "empty body".into();
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(SHOWN)]);
    let ellipsis = if body.len() > SHOWN { "..." } else { "" };
    format!("body {:?}{ellipsis}", text.trim_end())
}

/// JSON equality where numbers compare by value (`3` equals `3.0`).
fn json_equal(left: &serde_json::Value, right: &serde_json::Value) -> bool {
    match (left, right) {
        (serde_json::Value::Number(a), serde_json::Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => left == right,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extractor(json: &str) -> CompiledExtractor {
        CompiledExtractor::compile(&serde_json::from_str(json).unwrap()).unwrap()
    }

    #[test]
    fn json_extraction_with_filters() {
        let body = br#"{"buildings": [{"id": 1, "can_build": true}, {"id": 2, "can_build": false}, {"id": 3, "can_build": true}]}"#;
        let headers = vec![("X-Id".to_owned(), "abc".to_owned())];
        let mut random = VuRandom::new(1);
        let mut view = ResponseView::new(200, body, &headers, &JsonScope::Whole);
        let all = extractor(
            r#"{"var": "ids", "from": "json", "expression": "$.buildings[?@.can_build == true].id", "pick": "all"}"#,
        );
        assert_eq!(all.extract(&mut view, &mut random).unwrap().to_string(), "[1, 3]");
        let first = extractor(r#"{"var": "id", "from": "json", "expression": "$.buildings[*].id"}"#);
        assert_eq!(first.extract(&mut view, &mut random).unwrap().to_string(), "1");
        let missing = extractor(r#"{"var": "x", "from": "json", "expression": "$.nothing"}"#);
        assert!(missing.extract(&mut view, &mut random).is_none());
        let defaulted = extractor(r#"{"var": "x", "from": "json", "expression": "$.nothing", "default": 7}"#);
        assert_eq!(defaulted.extract(&mut view, &mut random).unwrap().to_string(), "7");
        let header = extractor(r#"{"var": "h", "from": "header", "expression": "x-id"}"#);
        assert_eq!(header.extract(&mut view, &mut random).unwrap().to_string(), "abc");
        let regex = extractor(r#"{"var": "r", "from": "regex", "expression": "\"id\": (\\d+)", "pick": "all"}"#);
        assert_eq!(regex.extract(&mut view, &mut random).unwrap().to_string(), r#"["1", "2", "3"]"#);
        for _ in 0..50 {
            let random_pick = extractor(
                r#"{"var": "r", "from": "json", "expression": "$.buildings[?@.can_build == true].id", "pick": "random"}"#,
            );
            let value = random_pick.extract(&mut view, &mut random).unwrap().to_string();
            assert!(value == "1" || value == "3", "{value}");
        }
    }

    #[test]
    fn checks() {
        let headers = Vec::new();
        // Parsed only as far as `$.ok` and `$.missing` reach, as a step with these checks would.
        let scope = JsonScope::of(["$.ok", "$.missing"]);
        let mut view = ResponseView::new(201, br#"{"ok": true, "name": "x"}"#, &headers, &scope);
        let check = |json: &str| CompiledCheck::compile(&serde_json::from_str(json).unwrap()).unwrap();
        assert!(check(r#"{"type": "status", "in": [200, 201]}"#).passes(&mut view));
        assert!(!check(r#"{"type": "status", "in": [200]}"#).passes(&mut view));
        assert!(check(r#"{"type": "json", "expression": "$.ok", "equals": true}"#).passes(&mut view));
        assert!(!check(r#"{"type": "json", "expression": "$.ok", "equals": false}"#).passes(&mut view));
        assert!(!check(r#"{"type": "json", "expression": "$.missing"}"#).passes(&mut view));
        assert!(check(r#"{"type": "body_contains", "text": "name"}"#).passes(&mut view));
        assert!(check(r#"{"type": "body_matches", "pattern": "\"name\":\\s*\"x\""}"#).passes(&mut view));
        assert_eq!(
            check(r#"{"type": "json", "expression": "$.ok", "equals": false}"#).failure(&mut view),
            "json $.ok: expected false, found true"
        );
        assert_eq!(check(r#"{"type": "status", "in": [200]}"#).failure(&mut view), "status 201 not in [200]");
        let label = |json: &str| check_label(&serde_json::from_str(json).unwrap());
        assert_eq!(label(r#"{"type": "status", "in": [200, 201]}"#), "status in [200, 201]");
        assert_eq!(label(r#"{"type": "json", "expression": "$.ok", "equals": true}"#), "json $.ok == true");
    }
}
