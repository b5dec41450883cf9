//! Which members of a JSON response a step's extractors and checks can read, and a parse of
//! the body that builds only those.
//!
//! Why: a JSON check such as `$.resources.gold` on a 3-KB answer made the whole answer into a
//! `serde_json::Value` (a map, a string and a node per member, freed again at once): the
//! largest cost of the game scenario after the sockets (issue 22, `bench/README.md`). A JSONPath
//! that starts with child name segments (`$.a.b...`) reads nothing outside the value at `a.b`,
//! whatever follows (filters, wildcards, descendants): the parse keeps the members on such
//! paths and the whole value where each path's leading names end, and reads past every other
//! member without building it. A path that starts otherwise (`$`, `$[0]`, `$..a`, `$.*`) needs
//! the whole document.
//!
//! The result of every query is the same as on the whole document: the members a query can
//! reach are there, built the same way. So is what counts as JSON: the members read past are
//! still parsed in full (strings, escapes, numbers, nesting depth), only into nothing, so that
//! a body the whole parse refuses is refused here too.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json_path::JsonPath;
use std::fmt;

/// The parts of a JSON body that a step reads.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum JsonScope {
    Whole,
    /// Only these members of the top-level object (and what is under them as each says).
    Members(Vec<(String, JsonScope)>),
}

impl JsonScope {
    /// What the queries of `paths` read; `Members(vec![])` (nothing) for no path.
    pub fn of<'p>(paths: impl IntoIterator<Item = &'p JsonPath>) -> Self {
        let mut scope = JsonScope::Members(Vec::new());
        for path in paths {
            scope.add(&leading_names(&path.to_string()));
        }
        scope
    }

    fn add(&mut self, names: &[String]) {
        let JsonScope::Members(members) = self else { return };
        let Some((first, rest)) = names.split_first() else {
            *self = JsonScope::Whole;
            return;
        };
        match members.iter_mut().find(|(name, _)| name == first) {
            Some((_, below)) => below.add(rest),
            None => {
                let mut below = JsonScope::Members(Vec::new());
                below.add(rest);
                members.push((first.clone(), below));
            }
        }
    }

    /// The body parsed as JSON, as far as this scope reaches; `None` when it is not JSON.
    pub fn parse(&self, body: &[u8]) -> Option<serde_json::Value> {
        match self {
            JsonScope::Whole => serde_json::from_slice(body).ok(),
            JsonScope::Members(_) => {
                // As `serde_json::from_slice`: one value, then only whitespace.
                let mut deserializer = serde_json::Deserializer::from_slice(body);
                let value = Pruned(self).deserialize(&mut deserializer).ok()?;
                deserializer.end().ok()?;
                Some(value)
            }
        }
    }
}

/// The child name segments a path starts with, read from its canonical form (`JsonPath`'s
/// `Display`): `.name` for a name in shorthand, whose characters exclude `.`, `[`, `*` and
/// white space; `[...]`, `.*` and `..` (descendants) end the names.
fn leading_names(canonical: &str) -> Vec<String> {
    let mut names = Vec::new();
    let Some(mut rest) = canonical.strip_prefix('$') else { return names };
    while let Some(after_dot) = rest.strip_prefix('.') {
        let end = after_dot.find(['.', '[']).unwrap_or(after_dot.len());
        let name = &after_dot[..end];
        if name.is_empty() || name == "*" {
            break;
        }
        names.push(name.to_owned());
        rest = &after_dot[end..];
    }
    names
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
        }
    }
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

    fn scope(paths: &[&str]) -> JsonScope {
        let paths: Vec<JsonPath> = paths.iter().map(|path| JsonPath::parse(path).unwrap()).collect();
        JsonScope::of(&paths)
    }

    fn members(list: &[(&str, JsonScope)]) -> JsonScope {
        JsonScope::Members(list.iter().map(|(name, scope)| ((*name).to_owned(), scope.clone())).collect())
    }

    #[test]
    fn paths_give_their_leading_names() {
        assert_eq!(scope(&[]), members(&[]));
        assert_eq!(scope(&["$.resources.gold"]), members(&[("resources", members(&[("gold", JsonScope::Whole)]))]));
        assert_eq!(scope(&["$.buildings[?@.can_build == true].kind"]), members(&[("buildings", JsonScope::Whole)]));
        assert_eq!(scope(&["$['token']"]), JsonScope::Whole);
        assert_eq!(scope(&["$.a.b", "$.a", "$.c..d", "$.e.*"]), members(&[("a", JsonScope::Whole), ("c", JsonScope::Whole), ("e", JsonScope::Whole)]));
        assert_eq!(scope(&["$.a", "$..b"]), JsonScope::Whole);
        assert_eq!(scope(&["$.a", "$"]), JsonScope::Whole);
        assert_eq!(scope(&["$.*"]), JsonScope::Whole);
        assert_eq!(scope(&["$[0].a"]), JsonScope::Whole);
        assert_eq!(scope(&["$.città.è"]), members(&[("città", members(&[("è", JsonScope::Whole)]))]));
    }

    /// Every query gives on the scope's parse what it gives on the whole document.
    #[test]
    fn queries_find_on_the_part_what_they_find_on_the_whole() {
        let bodies = [
            r#"{"resources": {"gold": 5, "wood": [1, 2]}, "buildings": [{"kind": "farm", "can_build": true}, {"kind": "mine", "can_build": false}], "x": "a\"b"}"#,
            r#"{"resources": [1, 2], "buildings": {"kind": "farm"}}"#,
            r#"{"resources": {"gold": null}, "resources": {"wood": 1}}"#,
            r#"[{"resources": {"gold": 1}}]"#,
            r#""resources""#,
            r#"{"a": {"b": {"c": [1, {"d": 2}]}}, "è": {"f": true}}"#,
            "  {}  ",
        ];
        let queries = ["$.resources.gold", "$.resources.wood[1]", "$.buildings[?@.can_build == true].kind", "$.a.b.c[1].d", "$.a.b..d", "$.x", "$.è.f", "$.buildings.kind"];
        for body in bodies {
            let whole: serde_json::Value = serde_json::from_str(body).unwrap();
            for query in queries {
                let path = JsonPath::parse(query).unwrap();
                let part = JsonScope::of([&path]).parse(body.as_bytes()).unwrap();
                assert_eq!(path.query(&part).all(), path.query(&whole).all(), "{query} on {body}");
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
        assert_eq!(scope.parse(br#"{"ok": 1, "other": {"a": [1, "\u00e9", 2.5e3, null]}}"#), Some(serde_json::json!({"ok": 1})));
    }
}
