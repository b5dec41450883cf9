//! Which members of a JSON response a step's extractors and checks can read, and a parse of
//! the body that builds only those.
//!
//! Why: a JSON check such as `$.resources.gold` on a 3-KB answer made the whole answer into a
//! `serde_json::Value` (a map, a string and a node per member, freed again at once): the
//! largest cost of the game scenario after the sockets (issue 22, `bench/NOTES.md`). A JSONPath
//! reads only what its segments lead to: `$.a.b` nothing outside the value at `a.b`;
//! `$.list[?@.ok == true].name` only the `ok` and `name` members of each element of `list`. The
//! parse keeps the members on such paths, the elements (all of them, each pruned alike) where a
//! path takes a wildcard, an index or a filter, and the whole value where a path's segments end
//! or stop being understood; it reads past every other member without building it. A path that
//! starts otherwise (`$`, `$..a`, `$['a']`), or whose filter reads the root (`$`), needs the
//! whole document.
//!
//! The result of every query is the same as on the whole document: the members a query can
//! reach are there, built the same way. So is what counts as JSON: the members read past are
//! still parsed in full (strings, escapes, numbers, nesting depth), only into nothing, so that
//! a body the whole parse refuses is refused here too.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// The parts of a JSON body that a step reads.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum JsonScope {
    Whole,
    /// Only these members of an object (and what is under them as each says).
    Members(Vec<(String, JsonScope)>),
    /// Every element of an array, or every member of an object, each as far as this reaches.
    Each(Box<JsonScope>),
}

/// One step of what a path reads.
#[derive(Debug, Clone, PartialEq)]
enum Reach {
    /// The member of that name.
    Name(String),
    /// Every element or member (a wildcard, an index or a filter), and in each what the
    /// filter's own paths read (`@.a.b` is `[a, b]`; `@` alone is `[]`, the whole element).
    Each(Vec<Vec<String>>),
}

impl JsonScope {
    /// What the JSONPath `expressions` (each already parsed, so valid) read; `Members(vec![])`
    /// (nothing) for no path.
    pub fn of<'p>(expressions: impl IntoIterator<Item = &'p str>) -> Self {
        let mut scope = JsonScope::Members(Vec::new());
        for expression in expressions {
            scope.add(&reach(expression));
        }
        scope
    }

    fn add(&mut self, steps: &[Reach]) {
        let Some((first, rest)) = steps.split_first() else {
            *self = JsonScope::Whole;
            return;
        };
        match (&mut *self, first) {
            (JsonScope::Whole, _) => {}
            (JsonScope::Members(members), Reach::Name(name)) => {
                match members.iter_mut().find(|(member, _)| member == name) {
                    Some((_, below)) => below.add(rest),
                    None => {
                        let mut below = JsonScope::Members(Vec::new());
                        below.add(rest);
                        members.push((name.clone(), below));
                    }
                }
            }
            (JsonScope::Members(members), Reach::Each(reads)) if members.is_empty() => {
                let mut each = JsonScope::Members(Vec::new());
                each.add_each(reads, rest);
                *self = JsonScope::Each(Box::new(each));
            }
            (JsonScope::Each(each), Reach::Each(reads)) => each.add_each(reads, rest),
            // A value read both by name and element by element: kept whole.
            (this, _) => *this = JsonScope::Whole,
        }
    }

    fn add_each(&mut self, reads: &[Vec<String>], rest: &[Reach]) {
        for read in reads {
            let names: Vec<Reach> = read.iter().cloned().map(Reach::Name).collect();
            self.add(&names);
        }
        self.add(rest);
    }

    /// The body parsed as JSON, as far as this scope reaches; `None` when it is not JSON.
    pub fn parse(&self, body: &[u8]) -> Option<serde_json::Value> {
        match self {
            JsonScope::Whole => serde_json::from_slice(body).ok(),
            JsonScope::Members(_) | JsonScope::Each(_) => {
                // As `serde_json::from_slice`: one value, then only whitespace.
                let mut deserializer = serde_json::Deserializer::from_slice(body);
                let value = Pruned(self).deserialize(&mut deserializer).ok()?;
                deserializer.end().ok()?;
                Some(value)
            }
        }
    }
}

/// What a JSONPath, as written, reads: its steps from the root, the whole value where they end.
/// Only forms read with certainty become steps: `.name` in shorthand, `.*`, `[*]`, `[N]` and a
/// filter `[?...]` whose relative paths are `@` and `.name`s (compared with literals, joined by
/// `&&`, `||`, `!`, parentheses and function calls). Anything else (a bracketed name, a slice,
/// several selectors, `..`, `@[0]`) ends the steps there, and a filter that reads the root (`$`)
/// makes them none: the whole document.
fn reach(expression: &str) -> Vec<Reach> {
    let mut steps = Vec::new();
    let mut rest = expression.as_bytes();
    let Some(after_root) = rest.strip_prefix(b"$") else { return steps };
    rest = after_root;
    loop {
        match rest {
            [b'.', b'*', after @ ..] => {
                steps.push(Reach::Each(Vec::new()));
                rest = after;
            }
            [b'.', after @ ..] if after.first().is_some_and(|&c| starts_name(c)) => {
                let end = after.iter().position(|&c| !in_name(c)).unwrap_or(after.len());
                steps.push(Reach::Name(String::from_utf8_lossy(&after[..end]).into_owned()));
                rest = &after[end..];
            }
            [b'[', after @ ..] => match bracket(after) {
                Some((Bracketed::Each(reads), after)) => {
                    steps.push(Reach::Each(reads));
                    rest = after;
                }
                Some((Bracketed::Root, _)) => return Vec::new(),
                None => return until_not_understood(steps, rest),
            },
            _ => return until_not_understood(steps, rest),
        }
    }
}

/// The steps read with certainty, where the rest of the path (`rest`) is not understood: the
/// value where they end is kept whole, unless a filter further on reads the root
/// (`$.x[?@.*][?@.a == $.a]`): then the whole document is.
fn until_not_understood(steps: Vec<Reach>, rest: &[u8]) -> Vec<Reach> {
    if reads_root(rest) {
        Vec::new()
    } else {
        steps
    }
}

/// Whether `text`, the rest of a path, names the root (`$`) outside its string literals.
fn reads_root(text: &[u8]) -> bool {
    let mut at = 0;
    while let Some(&c) = text.get(at) {
        match c {
            b'$' => return true,
            // An unclosed literal reads no root.
            b'\'' | b'"' => match literal_end(text, at) {
                Some(end) => at = end,
                None => return false,
            },
            _ => {}
        }
        at += 1;
    }
    false
}

/// Where the string literal opening at `text[start]` (a quote) closes, past escaped characters;
/// `None` when it does not.
fn literal_end(text: &[u8], start: usize) -> Option<usize> {
    let quote = text[start];
    let mut at = start + 1;
    while *text.get(at)? != quote {
        at += if text[at] == b'\\' { 2 } else { 1 };
    }
    Some(at)
}

enum Bracketed {
    /// Each element or member, with what the selector reads in each.
    Each(Vec<Vec<String>>),
    /// A filter that reads the document's root.
    Root,
}

/// A bracketed segment understood, from just after its `[` to just after its `]`.
fn bracket(text: &[u8]) -> Option<(Bracketed, &[u8])> {
    let inner_start = text.iter().position(|c| !c.is_ascii_whitespace())?;
    let text_after_space = &text[inner_start..];
    match text_after_space.first()? {
        b'*' | b'-' | b'0'..=b'9' => {
            // A wildcard or an index (a slice's `:` or a list's `,` is not understood).
            let end = text_after_space.iter().position(|&c| c == b']')?;
            let inside = std::str::from_utf8(&text_after_space[..end]).ok()?.trim();
            let understood = inside == "*" || inside.parse::<i64>().is_ok();
            understood.then(|| (Bracketed::Each(Vec::new()), &text_after_space[end + 1..]))
        }
        b'?' => filter(&text_after_space[1..]),
        _ => None,
    }
}

/// A filter's relative paths, from just after its `?` to just after the segment's `]`.
fn filter(text: &[u8]) -> Option<(Bracketed, &[u8])> {
    let mut reads = Vec::new();
    let mut depth = 0usize;
    let mut at = 0;
    while at < text.len() {
        let c = text[at];
        match c {
            b']' if depth == 0 => return Some((Bracketed::Each(reads), &text[at + 1..])),
            b'(' => depth += 1,
            b')' => depth = depth.checked_sub(1)?,
            b'$' => return Some((Bracketed::Root, &[])),
            b'\'' | b'"' => at = literal_end(text, at)?,
            b'@' => {
                let mut names = Vec::new();
                while let [b'.', first, ..] = &text[at + 1..] {
                    if !starts_name(*first) {
                        break;
                    }
                    let from = at + 2;
                    let end = text[from..].iter().position(|&c| !in_name(c)).map_or(text.len(), |n| from + n);
                    names.push(String::from_utf8_lossy(&text[from..end]).into_owned());
                    at = end - 1;
                }
                // `@[...]`, `@.*` or `@..x` go on past what is understood.
                if matches!(text.get(at + 1), Some(b'[' | b'.')) {
                    return None;
                }
                reads.push(names);
            }
            b'-' | b'0'..=b'9' => {
                // A number, its fraction and exponent included.
                while text.get(at + 1).is_some_and(|c| c.is_ascii_digit() || b".eE+-".contains(c)) {
                    at += 1;
                }
            }
            // Another selector after the filter in the same brackets.
            b',' if depth == 0 => return None,
            // Words (`true`, `null`, function names), comparisons, logic, arguments.
            _ if c.is_ascii_alphabetic() || c.is_ascii_whitespace() || b"_=!<>&|,".contains(&c) => {}
            _ => return None,
        }
        at += 1;
    }
    None
}

/// The first character of a name in shorthand (`.name`): a letter, `_` or any non-ASCII byte.
fn starts_name(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c >= 0x80
}

fn in_name(c: u8) -> bool {
    starts_name(c) || c.is_ascii_digit()
}

/// A pruned value's visitor methods for the scalars its scope does not read into: `null`.
macro_rules! scalars_as_null {
    () => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(serde_json::Value::Null)
        }

        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(serde_json::Value::Null)
        }

        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(serde_json::Value::Null)
        }

        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(serde_json::Value::Null)
        }

        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(serde_json::Value::Null)
        }

        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(serde_json::Value::Null)
        }
    };
}

/// Builds a value as far as its scope reaches: an object's members out of scope are parsed
/// and dropped; a value where the scope expected an object (which no name segment reads into)
/// is parsed and built as `null`.
struct Pruned<'s>(&'s JsonScope);

impl<'de> DeserializeSeed<'de> for Pruned<'_> {
    type Value = serde_json::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        match self.0 {
            JsonScope::Whole => serde::Deserialize::deserialize(deserializer),
            JsonScope::Members(members) => deserializer.deserialize_any(PrunedVisitor(members)),
            JsonScope::Each(each) => deserializer.deserialize_any(EachVisitor(each)),
        }
    }
}

/// Every element of an array, or every member of an object, built as far as `0` reaches; any
/// other value (which no wildcard, index or filter reads into) is parsed and built as `null`.
struct EachVisitor<'s>(&'s JsonScope);

impl<'de> Visitor<'de> for EachVisitor<'_> {
    type Value = serde_json::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(name) = map.next_key::<String>()? {
            object.insert(name, map.next_value_seed(Pruned(self.0))?);
        }
        Ok(serde_json::Value::Object(object))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut elements = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(element) = seq.next_element_seed(Pruned(self.0))? {
            elements.push(element);
        }
        Ok(serde_json::Value::Array(elements))
    }

    scalars_as_null!();
}

struct PrunedVisitor<'s>(&'s [(String, JsonScope)]);

impl<'de> Visitor<'de> for PrunedVisitor<'_> {
    type Value = serde_json::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(member) = map.next_key_seed(MemberOf(self.0))? {
            match member {
                Some(index) => {
                    let (name, scope) = &self.0[index];
                    // A name given twice: the last wins, as in the whole parse.
                    object.insert(name.clone(), map.next_value_seed(Pruned(scope))?);
                }
                None => {
                    map.next_value_seed(Skip)?;
                }
            }
        }
        Ok(serde_json::Value::Object(object))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Skip.visit_seq(seq).map(|_| serde_json::Value::Null)
    }

    scalars_as_null!();
}

/// An object's key: the index of the scope's member of that name, if any.
struct MemberOf<'s>(&'s [(String, JsonScope)]);

impl<'de> DeserializeSeed<'de> for MemberOf<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        // `deserialize_str`, as the whole parse reads keys: the same checks on the same bytes.
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for MemberOf<'_> {
    type Value = Option<usize>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an object key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().position(|(name, _)| name == key))
    }
}

/// A value parsed as the whole parse would (`deserialize_any`, not serde_json's lighter
/// `ignored_any` pass, which checks less) and dropped as it goes.
#[derive(Clone, Copy)]
struct Skip;

impl<'de> DeserializeSeed<'de> for Skip {
    type Value = IgnoredAny;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = IgnoredAny;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_key_seed(SkipKey)?.is_some() {
            map.next_value_seed(Skip)?;
        }
        Ok(IgnoredAny)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element_seed(Skip)?.is_some() {}
        Ok(IgnoredAny)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(IgnoredAny)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(IgnoredAny)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(IgnoredAny)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(IgnoredAny)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(IgnoredAny)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(IgnoredAny)
    }
}

/// A key read past (`deserialize_str`, as the whole parse reads keys).
struct SkipKey;

impl<'de> DeserializeSeed<'de> for SkipKey {
    type Value = IgnoredAny;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(Skip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json_path::JsonPath;

    fn scope(paths: &[&str]) -> JsonScope {
        for path in paths {
            JsonPath::parse(path).unwrap();
        }
        JsonScope::of(paths.iter().copied())
    }

    fn members(list: &[(&str, JsonScope)]) -> JsonScope {
        JsonScope::Members(list.iter().map(|(name, scope)| ((*name).to_owned(), scope.clone())).collect())
    }

    fn each(scope: JsonScope) -> JsonScope {
        JsonScope::Each(Box::new(scope))
    }

    use JsonScope::Whole;

    #[test]
    fn paths_give_what_they_read() {
        assert_eq!(scope(&[]), members(&[]));
        assert_eq!(scope(&["$.resources.gold"]), members(&[("resources", members(&[("gold", Whole)]))]));
        assert_eq!(
            scope(&["$.buildings[?@.can_build == true].kind"]),
            members(&[("buildings", each(members(&[("can_build", Whole), ("kind", Whole)])))])
        );
        assert_eq!(
            scope(&["$.b[?@.cost.gold < 1.5e2 && !(@.x) || length(@.name) > 2].kind"]),
            members(&[(
                "b",
                each(members(&[("cost", members(&[("gold", Whole)])), ("x", Whole), ("name", Whole), ("kind", Whole)]))
            )])
        );
        assert_eq!(scope(&["$.a[*].b", "$.a.*.c", "$.a[0]"]), members(&[("a", each(Whole))]));
        assert_eq!(scope(&["$.a[*].b", "$.a[-1].c"]), members(&[("a", each(members(&[("b", Whole), ("c", Whole)])))]));
        assert_eq!(scope(&["$.a[?@]"]), members(&[("a", each(Whole))]));
        // What is not read with certainty ends the steps: the value there is kept whole.
        assert_eq!(scope(&["$.a[?@['x'] == 1].b"]), members(&[("a", Whole)]));
        assert_eq!(scope(&["$.a[?@.x.*]"]), members(&[("a", Whole)]));
        assert_eq!(scope(&["$.a[?@.x, 0]"]), members(&[("a", Whole)]));
        assert_eq!(scope(&["$.a[1:2].b"]), members(&[("a", Whole)]));
        assert_eq!(scope(&["$.a.b", "$.a[*].b"]), members(&[("a", Whole)]));
        assert_eq!(scope(&["$.a[?@.x == '@.y]$'].z"]), members(&[("a", each(members(&[("x", Whole), ("z", Whole)])))]));
        assert_eq!(
            scope(&["$.a[?@.x == \"it\\\"s $\"].z"]),
            members(&[("a", each(members(&[("x", Whole), ("z", Whole)])))])
        );
        // A filter reading the root needs the whole document.
        assert_eq!(scope(&["$.a[?@.x == $.y].z"]), Whole);
        // ... even after a segment not understood (found by the proptest below).
        assert_eq!(scope(&["$.x[?@.*][?@.a == $.a]"]), Whole);
        assert_eq!(scope(&["$.x[1:2][?@.a == $.a]"]), Whole);
        assert_eq!(scope(&["$.x[1:2][?@.a == '$']"]), members(&[("x", Whole)]));
        assert_eq!(scope(&["$['token']"]), Whole);
        assert_eq!(
            scope(&["$.a.b", "$.a", "$.c..d", "$.e.*"]),
            members(&[("a", Whole), ("c", Whole), ("e", each(Whole))])
        );
        assert_eq!(scope(&["$.a", "$..b"]), Whole);
        assert_eq!(scope(&["$.a", "$"]), Whole);
        assert_eq!(scope(&["$.*"]), each(Whole));
        assert_eq!(scope(&["$[0].a"]), each(members(&[("a", Whole)])));
        assert_eq!(scope(&["$.città.è"]), members(&[("città", members(&[("è", Whole)]))]));
    }

    /// Every query gives on the scope's parse what it gives on the whole document, alone and
    /// beside others.
    #[test]
    fn queries_find_on_the_part_what_they_find_on_the_whole() {
        let bodies = [
            r#"{"resources": {"gold": 5, "wood": [1, 2]}, "buildings": [{"kind": "farm", "can_build": true, "cost": {"gold": 100}}, {"kind": "mine", "can_build": false, "cost": {"gold": 300}}], "x": "a\"b"}"#,
            r#"{"resources": [1, 2], "buildings": {"kind": "farm"}}"#,
            r#"{"resources": {"gold": null}, "resources": {"wood": 1}}"#,
            r#"{"buildings": {"a": {"kind": "farm", "can_build": true}, "b": {"kind": "mine"}, "a": {"kind": "wall", "can_build": true}}}"#,
            r#"{"buildings": [1, "x", null, [{"can_build": true, "kind": "deep"}], {"can_build": true}, {"can_build": true, "kind": {"k": [1]}}]}"#,
            r#"[{"resources": {"gold": 1}, "kind": "top", "can_build": true}, 3]"#,
            r#""resources""#,
            r#"{"a": {"b": {"c": [1, {"d": 2}]}}, "è": {"f": true}, "y": 2}"#,
            r#"{"a": [{"x": 2, "z": "two", "name": "abc"}, {"x": "@.y]$", "z": 1}, {"x": 1.5, "z": [true]}], "y": 2}"#,
            "  {}  ",
            r#"{"a": null, "x": [[null]]}"#,
        ];
        let queries = [
            "$.resources.gold",
            "$.resources.wood[1]",
            "$.buildings[?@.can_build == true].kind",
            "$.buildings[?@.can_build].cost.gold",
            "$.buildings[?@.cost.gold < 2e2].kind",
            "$.buildings[*].kind",
            "$.buildings.*.can_build",
            "$.buildings[-1]",
            "$.buildings[1:3]",
            "$.a.b.c[1].d",
            "$.a.b..d",
            "$.a[?@.x == $.y].z",
            "$.a[?@.x == '@.y]$'].z",
            "$.a[?length(@.name) == 3].z",
            "$.a[?@.x > 1 && !(@.z == 'two') || @.x == 1.5].z",
            "$.a[?@['x'] == 2].z",
            "$[?@.can_build == true].kind",
            "$[0].resources.gold",
            "$.*.gold",
            "$.x",
            "$.è.f",
            "$.buildings.kind",
            "$.x[?@.*][?@.a == $.a]",
        ];
        for body in bodies {
            let whole: serde_json::Value = serde_json::from_str(body).unwrap();
            for query in queries {
                let path = JsonPath::parse(query).unwrap();
                let part = JsonScope::of([query]).parse(body.as_bytes()).unwrap();
                assert_eq!(path.query(&part).all(), path.query(&whole).all(), "{query} on {body}");
                let all = JsonScope::of(queries).parse(body.as_bytes()).unwrap();
                assert_eq!(path.query(&all).all(), path.query(&whole).all(), "{query} beside the others on {body}");
            }
            for (first, second) in queries.iter().zip(queries.iter().skip(3)) {
                let pair = JsonScope::of([*first, *second]).parse(body.as_bytes()).unwrap();
                for query in [first, second] {
                    let path = JsonPath::parse(query).unwrap();
                    assert_eq!(
                        path.query(&pair).all(),
                        path.query(&whole).all(),
                        "{query} beside {first}, {second} on {body}"
                    );
                }
            }
        }
    }

    /// Generated documents and paths: whatever the reader makes of a path, alone or beside
    /// another, its query finds on the pruned parse what it finds on the whole document.
    mod generated {
        use super::*;
        use proptest::prelude::*;

        const KEYS: [&str; 5] = ["a", "b", "kind", "can_build", "x"];

        fn document() -> impl Strategy<Value = serde_json::Value> {
            let leaf = prop_oneof![
                Just(serde_json::Value::Null),
                any::<bool>().prop_map(serde_json::Value::from),
                (-3i64..4).prop_map(serde_json::Value::from),
                prop::sample::select(vec!["x", "farm", "@.a]$", "it's"]).prop_map(serde_json::Value::from),
            ];
            leaf.prop_recursive(4, 40, 4, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
                    prop::collection::vec((prop::sample::select(KEYS.to_vec()), inner), 0..4).prop_map(|members| {
                        serde_json::Value::Object(members.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                    }),
                ]
            })
        }

        /// Mostly an object at the top, as answers are, so that paths from `$` find members.
        fn answer() -> impl Strategy<Value = serde_json::Value> {
            prop_oneof![
                3 => prop::collection::vec((prop::sample::select(KEYS.to_vec()), document()), 1..6)
                    .prop_map(|members| serde_json::Value::Object(members.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
                1 => document(),
            ]
        }

        fn segment() -> impl Strategy<Value = String> {
            let key = prop::sample::select(KEYS.to_vec());
            prop_oneof![
                key.clone().prop_map(|k| format!(".{k}")),
                Just(".*".to_owned()),
                Just("[*]".to_owned()),
                (-2i64..3).prop_map(|n| format!("[{n}]")),
                key.clone().prop_map(|k| format!("..{k}")),
                key.clone().prop_map(|k| format!("['{k}']")),
                Just("[0:2]".to_owned()),
                (key.clone(), -1i64..3).prop_map(|(k, n)| format!("[?@.{k} == {n}]")),
                key.clone().prop_map(|k| format!("[?@.{k}]")),
                (key.clone(), key.clone()).prop_map(|(k, j)| format!("[?@.{k}.{j} > 0 || !(@.{j} == 'x')]")),
                key.clone().prop_map(|k| format!("[?length(@.{k}) > 1]")),
                key.clone().prop_map(|k| format!("[?@.{k} == $.a]")),
                key.clone().prop_map(|k| format!("[?@['{k}'] == '@.a]$']")),
                Just("[?@ == true]".to_owned()),
                Just("[?@.*]".to_owned()),
            ]
        }

        fn path() -> impl Strategy<Value = String> {
            prop::collection::vec(segment(), 0..4).prop_map(|segments| format!("${}", segments.concat()))
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
            #[test]
            fn a_pruned_parse_answers_as_the_whole(whole in answer(), first in path(), second in path()) {
                let body = serde_json::to_vec(&whole).unwrap();
                for query in [&first, &second] {
                    let parsed = JsonPath::parse(query).unwrap();
                    let alone = JsonScope::of([query.as_str()]).parse(&body).unwrap();
                    prop_assert_eq!(parsed.query(&alone).all(), parsed.query(&whole).all(), "{} alone", query);
                    let pair = JsonScope::of([first.as_str(), second.as_str()]).parse(&body).unwrap();
                    prop_assert_eq!(parsed.query(&pair).all(), parsed.query(&whole).all(), "{} beside {} and {}", query, first, second);
                }
            }
        }
    }

    /// A body the whole parse refuses is refused too, even where the scope reads past it.
    #[test]
    fn what_is_not_json_stays_not_json() {
        let scope = scope(&["$.ok"]);
        let deep = format!(r#"{{"ok": 1, "deep": {}{}}}"#, "[".repeat(200), "]".repeat(200));
        let refused: [&[u8]; 9] = [
            br#"{"ok": 1, "other": [1, 2}"#,
            br#"{"ok": 1} trailing"#,
            br#"{"ok": 1, "n": 1e999}"#,
            br#"{"ok": 1, "s": "\ud800"}"#,
            b"{\"ok\": 1, \"s\": \"\xff\"}",
            b"{\"ok\": 1, \"s\": \"a\x01b\"}",
            br#"{"ok": 1, "n": 01}"#,
            deep.as_bytes(),
            b"",
        ];
        for body in refused {
            assert!(serde_json::from_slice::<serde_json::Value>(body).is_err(), "{:?}", String::from_utf8_lossy(body));
            assert_eq!(scope.parse(body), None, "{:?}", String::from_utf8_lossy(body));
        }
        assert_eq!(
            scope.parse(br#"{"ok": 1, "other": {"a": [1, "\u00e9", 2.5e3, null]}}"#),
            Some(serde_json::json!({"ok": 1}))
        );
    }
}
