//! Endpoint templates: many request paths grouped as one endpoint (`GET /users/{id}/orders?page`).
//!
//! The parts of a path that vary per request (numbers, UUIDs, hexadecimal ids, long random
//! tokens, e-mail addresses) become placeholders; the segment after one named like a credential
//! is `{secret}` whatever it looks like (`/reset-token/{secret}`), unless it is itself a
//! credential's name in lowercase (`/oauth/token`); the query string is kept by its parameters'
//! names. What is a credential's name and what holds an e-mail address is Horde's redaction
//! rule (`horde.plan.redaction`), asked through [`Rules`], never written here again. A slot's
//! value is kept for the plan only where it is a plain id (never a token, an e-mail address, a
//! secret, a value of a secret-named parameter, or a value past 64 characters).

use rustc_hash::FxHashMap as HashMap;

/// Horde's rules on secrets, owned elsewhere (Python's `horde.plan.redaction`).
pub trait Rules {
    /// Whether a query field (or a path segment naming what follows it) holds a credential.
    fn is_secret_parameter(&mut self, name: &str) -> bool;
    /// Whether a path segment names a credential, so that the next one holds one
    /// (`/reset-token/XYZ`, `/api/key/XYZ`).
    fn names_a_secret(&mut self, segment: &str) -> bool;
    /// Whether the text holds an e-mail address (also percent-encoded).
    fn has_email(&mut self, text: &str) -> bool;
}

/// The kind of a slot's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Int,
    Uuid,
    Hex,
    Token,
    Email,
    Secret,
    /// A query parameter not named like a secret.
    Query,
    /// A given template's placeholder holding no token, address or secret.
    Named,
}

impl Kind {
    /// The kind of this name (`int`, ... `query`), or None.
    pub fn from_name(name: &str) -> Option<Kind> {
        [Kind::Int, Kind::Uuid, Kind::Hex, Kind::Token, Kind::Email, Kind::Secret, Kind::Query, Kind::Named]
            .into_iter()
            .find(|kind| kind.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Int => "int",
            Kind::Uuid => "uuid",
            Kind::Hex => "hex",
            Kind::Token => "token",
            Kind::Email => "email",
            Kind::Secret => "secret",
            Kind::Query => "query",
            Kind::Named => "named",
        }
    }

    /// A path placeholder's label.
    fn label(self) -> &'static str {
        match self {
            Kind::Int | Kind::Uuid | Kind::Hex => "id",
            other => other.name(),
        }
    }

    fn never_kept(self) -> bool {
        matches!(self, Kind::Token | Kind::Email | Kind::Secret)
    }
}

/// A placeholder of an endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Slot {
    pub label: String,
    pub kind: Kind,
    /// In the query (else in the path).
    pub in_query: bool,
}

/// A piece of a path template: literal text or a slot's index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Piece {
    Text(String),
    Slot(usize),
}

/// An endpoint's shape: method, path pieces, query parameters' names, slots.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shape {
    pub method: String,
    pub pieces: Vec<Piece>,
    pub query: Vec<String>,
    pub slots: Vec<Slot>,
}

impl Shape {
    /// `GET /users/{id}/orders?page`.
    pub fn name(&self) -> String {
        let mut name = format!("{} ", self.method);
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => name.push_str(text),
                Piece::Slot(index) => {
                    name.push('{');
                    name.push_str(&self.slots[*index].label);
                    name.push('}');
                }
            }
        }
        if !self.query.is_empty() {
            name.push('?');
            name.push_str(&self.query.join("&"));
        }
        name
    }

    /// What makes one endpoint, one row: its name and its slots' labels, whatever the kinds.
    pub fn endpoint_key(&self) -> String {
        let mut key = self.name();
        for slot in &self.slots {
            key.push('\u{0}');
            key.push_str(&slot.label);
            key.push(if slot.in_query { 'q' } else { 'p' });
        }
        key
    }
}

/// A template given by the user (`--template`, parsed by `horde.profile.endpoints`): a path
/// it matches whole takes its shape, each placeholder one path segment's text or more.
#[derive(Debug, Clone)]
pub struct Given {
    method: Option<String>,
    pattern: regex::Regex,
    labels: std::rc::Rc<[String]>,
    secret: Vec<bool>,
}

/// A piece of a given template: literal text, or a placeholder (its index).
#[derive(Debug, Clone)]
pub enum GivenPiece {
    Text(String),
    Slot(usize),
}

impl Given {
    /// `secret[i]`: placeholder `i` holds a secret whatever its value (named like one, or after
    /// a segment named like one).
    pub fn new(
        method: Option<String>,
        pieces: &[GivenPiece],
        labels: Vec<String>,
        secret: Vec<bool>,
    ) -> Result<Self, String> {
        let mut pattern = String::from("^(?:");
        for piece in pieces {
            match piece {
                GivenPiece::Text(text) => pattern.push_str(&regex::escape(text)),
                GivenPiece::Slot(_) => pattern.push_str("([^/]+)"),
            }
        }
        pattern.push_str(")$");
        let pattern = regex::Regex::new(&pattern).map_err(|error| error.to_string())?;
        Ok(Given { method, pattern, labels: labels.into(), secret })
    }
}

/// Longest value kept for the plan (a longer one is more likely text than an id).
pub const MAX_VALUE_LENGTH: usize = 64;
/// Letters-only segments at least this long are looked at for a random mix.
pub const RANDOM_LETTERS_LENGTH: usize = 16;
/// Names remembered with the rules' answer.
const NAME_CACHE: usize = 4096;

/// A request's template, as ranges of its target: what [`Templater::template`] fills.
#[derive(Debug, Default)]
pub struct Templated {
    /// The shape, as bytes that are equal exactly when the shapes are (0xFF, 0xFE: never in UTF-8).
    pub key: Vec<u8>,
    /// Path pieces: `(None, a, b)` literal `target[a..b]`, `(Some(kind), a, b)` a slot's value.
    pieces: Vec<(Option<Kind>, usize, usize)>,
    /// Query parameters: the name's range (None: `{param}`) and whether it is a secret's.
    query: Vec<(Option<(usize, usize)>, bool)>,
    /// Each slot's value as kept for the plan (None: it must not leave the log).
    pub values: Vec<Option<(usize, usize)>>,
    /// The labels of a given template's placeholders, when one matched the path.
    given: Option<std::rc::Rc<[String]>>,
}

impl Templated {
    /// The shape of the request `target` was templated from.
    pub fn shape(&self, method: &str, target: &str) -> Shape {
        let mut pieces = Vec::new();
        let mut slots = Vec::new();
        for &(kind, start, end) in &self.pieces {
            match kind {
                None => pieces.push(Piece::Text(target[start..end].to_string())),
                Some(kind) => {
                    let label = match &self.given {
                        Some(labels) => labels[slots.len()].clone(),
                        None => kind.label().to_string(),
                    };
                    pieces.push(Piece::Slot(slots.len()));
                    slots.push(Slot { label, kind, in_query: false });
                }
            }
        }
        let mut query = Vec::new();
        for &(name, secret) in &self.query {
            let label = name.map_or("{param}".to_string(), |(a, b)| target[a..b].to_string());
            slots.push(Slot {
                label: label.clone(),
                kind: if secret { Kind::Secret } else { Kind::Query },
                in_query: true,
            });
            query.push(label);
        }
        Shape { method: method.to_string(), pieces, query, slots }
    }
}

/// Turns requests into endpoints (see the module's text).
pub struct Templater<R: Rules> {
    rules: R,
    given: Vec<Given>,
    secret_names: HashMap<String, bool>,
    secret_segments: HashMap<String, bool>,
}

fn char_len(text: &str) -> usize {
    if text.is_ascii() {
        text.len()
    } else {
        text.chars().count()
    }
}

fn is_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

fn is_uuid(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 36
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| if matches!(i, 8 | 13 | 18 | 23) { *b == b'-' } else { b.is_ascii_hexdigit() })
}

fn is_hex(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 8
        && bytes.iter().all(u8::is_ascii_hexdigit)
        && bytes.iter().any(u8::is_ascii_digit)
        && bytes.iter().any(u8::is_ascii_alphabetic)
}

fn is_token(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 20
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'~' | b'.' | b'=' | b'-'))
        && bytes.iter().filter(|b| b.is_ascii_digit()).count() >= 3
        && bytes.iter().filter(|b| b.is_ascii_alphabetic()).count() >= 3
}

/// Whether a letters-only segment looks drawn at random (a key, a session id), not written
/// (`productRecommendations`): at least 16 letters with few vowels, and in mixed case the case
/// changing often (camelCase changes it once a word).
pub fn random_letters(segment: &str) -> bool {
    let bytes = segment.as_bytes();
    if bytes.len() < RANDOM_LETTERS_LENGTH || !bytes.iter().all(u8::is_ascii_alphabetic) {
        return false;
    }
    let vowels = bytes.iter().filter(|b| b"aeiouAEIOU".contains(b)).count() as f64 / bytes.len() as f64;
    if !bytes.iter().any(u8::is_ascii_uppercase) || !bytes.iter().any(u8::is_ascii_lowercase) {
        return vowels < 0.2;
    }
    let changes = bytes.windows(2).filter(|pair| pair[0].is_ascii_uppercase() != pair[1].is_ascii_uppercase()).count()
        as f64
        / (bytes.len() - 1) as f64;
    vowels < 0.3 && changes >= 0.3
}

/// `[a-z]+(?:[-_][a-z]+)*`, the whole text: a route's word.
fn is_route_word(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_lowercase()
        && bytes[bytes.len() - 1].is_ascii_lowercase()
        && bytes.iter().all(|b| b.is_ascii_lowercase() || *b == b'-' || *b == b'_')
        && !bytes.windows(2).any(|pair| !pair[0].is_ascii_lowercase() && !pair[1].is_ascii_lowercase())
}

/// `[A-Za-z0-9_.\[\]-]{1,40}`: a query parameter's name kept as written.
fn is_plain_name(text: &str) -> bool {
    (1..=40).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'[' | b']' | b'-'))
}

/// The rules' answer for a name, asked once while the cache holds it (bounded: cleared when full).
fn remembered(cache: &mut HashMap<String, bool>, name: &str, ask: impl FnOnce() -> bool) -> bool {
    if let Some(&known) = cache.get(name) {
        return known;
    }
    let answer = ask();
    if cache.len() >= NAME_CACHE {
        cache.clear();
    }
    cache.insert(name.to_string(), answer);
    answer
}

fn may_hold_email(text: &str) -> bool {
    text.contains('@') || text.contains("%40")
}

impl<R: Rules> Templater<R> {
    pub fn new(rules: R) -> Self {
        Templater { rules, given: Vec::new(), secret_names: HashMap::default(), secret_segments: HashMap::default() }
    }

    fn is_secret_parameter(&mut self, name: &str) -> bool {
        remembered(&mut self.secret_names, name, || self.rules.is_secret_parameter(name))
    }

    /// With templates given: the first one a request's path matches takes its shape.
    pub fn with_given(rules: R, given: Vec<Given>) -> Self {
        Templater { given, ..Self::new(rules) }
    }

    /// The rules it asks.
    pub fn rules_mut(&mut self) -> &mut R {
        &mut self.rules
    }

    /// Whether a path segment names a credential, so that the next one holds one.
    fn names_a_secret(&mut self, segment: &str) -> bool {
        // A segment without a letter (a number: the usual id) names nothing, and is not asked
        // about: a log of a million ids would ask a million times.
        if !segment.chars().any(char::is_alphabetic) {
            return false;
        }
        remembered(&mut self.secret_segments, segment, || self.rules.names_a_secret(segment))
    }

    /// The kind of id a path segment (or a value) is, or None when it is literal text.
    pub fn classify(&mut self, segment: &str) -> Option<Kind> {
        if is_digits(segment) {
            return Some(Kind::Int);
        }
        if may_hold_email(segment) {
            return self.rules.has_email(segment).then_some(Kind::Email);
        }
        if char_len(segment) < 8 {
            return None;
        }
        if is_uuid(segment) {
            Some(Kind::Uuid)
        } else if is_hex(segment) {
            Some(Kind::Hex)
        } else if is_token(segment) || random_letters(segment) {
            Some(Kind::Token)
        } else {
            None
        }
    }

    /// Whether the plan may keep a slot's value of this kind (not a token, an e-mail address,
    /// a secret, nor a value past 64 characters or holding an e-mail address).
    pub fn kept(&mut self, value: &str, kind: Option<Kind>) -> bool {
        if kind.is_some_and(Kind::never_kept) || (value.len() > MAX_VALUE_LENGTH && char_len(value) > MAX_VALUE_LENGTH)
        {
            return false;
        }
        !(may_hold_email(value) && self.rules.has_email(value))
    }

    /// Templates `method` `target` into `out` (its key, pieces and kept values).
    pub fn template(&mut self, method: &str, target: &str, out: &mut Templated) {
        out.key.clear();
        out.pieces.clear();
        out.query.clear();
        out.values.clear();
        out.given = None;
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let literal = match self.given_path(method, path, out) {
            Some(literal) => literal,
            None => self.auto_path(path, target, out),
        };
        if literal < path.len() {
            out.pieces.push((None, literal, path.len()));
        }
        // The method first, closed by a byte no UTF-8 text holds: "/a" + "GET" is not "/aG" + "ET".
        out.key.extend_from_slice(method.as_bytes());
        out.key.push(0xFD);
        for &(kind, start, end) in &out.pieces {
            match kind {
                None => out.key.extend_from_slice(&target.as_bytes()[start..end]),
                Some(kind) => out.key.extend_from_slice(&[0xFF, kind as u8]),
            }
        }
        if let Some(labels) = &out.given {
            // A given template's labels are its own: two templates of one shape may differ in them.
            for label in labels.iter() {
                out.key.push(0xFC);
                out.key.extend_from_slice(label.as_bytes());
            }
        }
        if query.is_empty() {
            return;
        }
        let query_start = path.len() + 1;
        let mut pair_start = query_start;
        for pair in query.split('&') {
            let at = pair_start;
            pair_start += pair.len() + 1;
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            if name.is_empty() {
                continue;
            }
            let plain = is_plain_name(name);
            let label = if plain { name } else { "{param}" };
            let repeated = out.query.iter().any(|&(range, _)| match range {
                Some((a, b)) => plain && &target[a..b] == name,
                None => !plain,
            });
            if repeated {
                continue; // a repeated parameter (a[]=1&a[]=2) is one slot
            }
            let secret = self.is_secret_parameter(label);
            out.query.push((plain.then_some((at, at + name.len())), secret));
            out.key.push(0xFE);
            out.key.extend_from_slice(label.as_bytes());
            out.key.extend_from_slice(&[0xFF, secret as u8]);
            let value_start = at + name.len() + 1;
            let kept = !secret && {
                let kind = self.classify(value);
                self.kept(value, kind)
            };
            out.values
                .push(kept.then_some((value_start.min(target.len()), (value_start + value.len()).min(target.len()))));
        }
    }

    /// The path through the first given template it matches: its pieces and values into
    /// `out`, and where the last literal text starts; None when none matches.
    fn given_path(&mut self, method: &str, path: &str, out: &mut Templated) -> Option<usize> {
        let (index, captures) = self
            .given
            .iter()
            .enumerate()
            .filter(|(_, given)| given.method.as_deref().is_none_or(|m| m == method))
            .find_map(|(index, given)| given.pattern.captures(path).map(|captures| (index, captures)))?;
        let mut literal = 0;
        for (slot, capture) in captures.iter().skip(1).flatten().enumerate() {
            let value = capture.as_str();
            let kind =
                if self.given[index].secret[slot] { Kind::Secret } else { self.classify(value).unwrap_or(Kind::Named) };
            let shown = if kind.never_kept() { kind } else { Kind::Named };
            if literal < capture.start() {
                out.pieces.push((None, literal, capture.start()));
            }
            out.pieces.push((Some(shown), capture.start(), capture.end()));
            let kept = self.kept(value, Some(kind));
            out.values.push(kept.then_some((capture.start(), capture.end())));
            literal = capture.end();
        }
        out.given = Some(self.given[index].labels.clone());
        Some(literal)
    }

    /// The path's automatic template into `out`; where the last literal text starts.
    fn auto_path(&mut self, path: &str, target: &str, out: &mut Templated) -> usize {
        let mut previous: &str = "";
        let mut literal = 0;
        let mut offset = 0;
        for segment in path.split('/') {
            let start = offset;
            offset += segment.len() + 1;
            let secret = !segment.is_empty()
                && self.names_a_secret(previous)
                && !(is_route_word(segment) && self.names_a_secret(segment));
            previous = segment;
            let whole = if secret {
                Some(Kind::Secret)
            } else if is_digits(segment) {
                Some(Kind::Int)
            } else if char_len(segment) < 8 && !segment.contains(['@', '%', '.']) {
                continue;
            } else {
                self.classify(segment)
            };
            if whole.is_none() && segment.contains('.') {
                let mut part_start = start;
                for part in segment.split('.') {
                    if let Some(kind) = self.classify(part) {
                        self.slot(out, target, literal, kind, part_start, part_start + part.len());
                        literal = part_start + part.len();
                    }
                    part_start += part.len() + 1;
                }
            } else if let Some(kind) = whole {
                self.slot(out, target, literal, kind, start, start + segment.len());
                literal = start + segment.len();
            }
        }
        literal
    }

    fn slot(&mut self, out: &mut Templated, target: &str, literal: usize, kind: Kind, start: usize, end: usize) {
        if literal < start {
            out.pieces.push((None, literal, start));
        }
        out.pieces.push((Some(kind), start, end));
        let kept = kind != Kind::Secret && self.kept(&target[start..end], Some(kind));
        out.values.push(kept.then_some((start, end)));
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A stand-in for `horde.plan.redaction`'s rules, enough for these tests.
    pub(crate) struct TestRules;

    impl Rules for TestRules {
        fn is_secret_parameter(&mut self, name: &str) -> bool {
            let lowered = name.to_lowercase();
            ["token", "secret", "password", "session", "key", "sig", "code"].iter().any(|word| lowered.contains(word))
        }
        fn names_a_secret(&mut self, segment: &str) -> bool {
            self.is_secret_parameter(&segment.replace('-', "_"))
        }
        fn has_email(&mut self, text: &str) -> bool {
            text.contains('@') && text.contains('.') || text.contains("%40")
        }
    }

    fn name_and_values(method: &str, target: &str) -> (String, Vec<Option<String>>) {
        let mut templater = Templater::new(TestRules);
        let mut out = Templated::default();
        templater.template(method, target, &mut out);
        let values = out.values.iter().map(|v| v.map(|(a, b)| target[a..b].to_string())).collect();
        (out.shape(method, target).name(), values)
    }

    #[test]
    fn ids_tokens_and_queries() {
        assert_eq!(
            name_and_values("GET", "/users/42/orders?page=2&token=abc"),
            ("GET /users/{id}/orders?page&token".into(), vec![Some("42".into()), Some("2".into()), None])
        );
        assert_eq!(name_and_values("GET", "/static/app.3f9a0c7be1.js").0, "GET /static/app.{id}.js");
        assert_eq!(name_and_values("GET", "/a/123e4567-e89b-12d3-a456-426614174000").0, "GET /a/{id}");
        assert_eq!(name_and_values("GET", "/reset-token/XYZ").0, "GET /reset-token/{secret}");
        assert_eq!(name_and_values("GET", "/oauth/token").0, "GET /oauth/token");
        assert_eq!(name_and_values("GET", "/u/bob@example.org").0, "GET /u/{email}");
        assert_eq!(name_and_values("GET", "/k/qZkTwRbXmPvLsNdH").0, "GET /k/{token}");
        assert_eq!(name_and_values("GET", "/a?x=1&x=2&%=3&&y").0, "GET /a?x&{param}&y");
        assert_eq!(name_and_values("GET", "/a?").0, "GET /a");
    }

    #[test]
    fn given_templates_come_first() {
        let pieces = [GivenPiece::Text("/blog/".into()), GivenPiece::Slot(0)];
        let blog = Given::new(None, &pieces, vec!["slug".into()], vec![false]).unwrap();
        let pieces = [GivenPiece::Text("/users/".into()), GivenPiece::Slot(0), GivenPiece::Text("/avatar".into())];
        let avatar = Given::new(Some("POST".into()), &pieces, vec!["name".into()], vec![false]).unwrap();
        let pieces = [GivenPiece::Text("/reset-token/".into()), GivenPiece::Slot(0)];
        let reset = Given::new(None, &pieces, vec!["t".into()], vec![true]).unwrap();
        let mut templater = Templater::with_given(TestRules, vec![blog, avatar, reset]);
        let mut out = Templated::default();
        let mut name = |method: &str, target: &str| {
            templater.template(method, target, &mut out);
            let values: Vec<Option<String>> =
                out.values.iter().map(|v| v.map(|(a, b)| target[a..b].to_string())).collect();
            (out.shape(method, target).name(), values)
        };
        assert_eq!(
            name("GET", "/blog/hello-world?x=1"),
            ("GET /blog/{slug}?x".into(), vec![Some("hello-world".into()), Some("1".into())])
        );
        assert_eq!(name("POST", "/users/bob/avatar").0, "POST /users/{name}/avatar");
        assert_eq!(name("GET", "/users/bob/avatar").0, "GET /users/bob/avatar");
        assert_eq!(name("GET", "/reset-token/abc"), ("GET /reset-token/{t}".into(), vec![None]));
        assert_eq!(name("GET", "/blog/a/b").0, "GET /blog/a/b");
    }

    #[test]
    fn the_key_tells_shapes_apart_exactly() {
        let mut templater = Templater::new(TestRules);
        let (mut a, mut b) = (Templated::default(), Templated::default());
        templater.template("GET", "/items/1", &mut a);
        templater.template("GET", "/items/77", &mut b);
        assert_eq!(a.key, b.key);
        templater.template("GET", "/items/deadbeef12", &mut b);
        assert_ne!(a.key, b.key);
        assert_eq!(a.shape("GET", "/items/1").endpoint_key(), b.shape("GET", "/items/deadbeef12").endpoint_key());
        templater.template("POST", "/items/1", &mut b);
        assert_ne!(a.key, b.key);
    }
}
