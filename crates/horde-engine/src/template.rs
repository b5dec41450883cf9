//! A step's templated text, as compiled: fixed, or a template of the plan's environment looked
//! up by name when a VU renders it. The HTTP, SQL and message steps all hold their templated
//! parts in these types; the VU renders them (`vu.rs`, `vu/http_step.rs`).

use horde_plan::templates::{is_identifier, EXPRESSION_WORDS};

/// What a typed JSON template renders when its expression is undefined.
pub(crate) const UNDEFINED_MARK: &str = "\u{1}undefined\u{1}";

/// A templated or fixed piece of text.
#[derive(Debug, Clone)]
pub(crate) enum Text {
    Fixed(String),
    Template(TemplateRef),
}

/// A template of the plan's environment, by name.
#[derive(Debug, Clone)]
pub(crate) struct TemplateRef {
    pub name: String,
    /// Where a VU keeps this template's last rendering, when the rendering depends on nothing
    /// but the VU's variables and the parameters (no random or clock function, no `iteration`):
    /// it is then rendered again only after a variable changed.
    pub memo_slot: Option<usize>,
    /// A template that is one variable or one `random_int` call with literal bounds, rendered
    /// without the template engine (`Vu::render_text`); `None` for any other.
    pub direct: Option<Direct>,
}

/// The templates most parameters are (`{{ t.aid }}`, `{{ random_int(1, 100000) }}`), rendered
/// straight from the VU's variables or the random stream: what minijinja would print, without
/// building its context and running its VM (about a microsecond a parameter, a tenth of a SQL
/// statement's client CPU). A variable not among the VU's own (a built-in, a parameter), or a
/// variable that shadows `random_int`, falls back to the template engine.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Direct {
    /// `{{ name }}` or `{{ name.field }}` (the field as the key value a lookup takes, made once;
    /// in a CSV feeder's row, the place its column was found last).
    Var { name: String, field: Option<minijinja::Value>, column: ColumnHint },
    /// `{{ random_int(low, high) }}`, low <= high.
    RandomInt { low: i64, high: i64 },
}

/// A value as `{{ value }}` prints it: a string as it is (copied without the formatter), any
/// other value by its `Display`, as minijinja's own output does with no escaping.
#[cfg(test)]
pub(crate) fn rendered(value: &minijinja::Value) -> String {
    let mut text = String::new();
    push_rendered(value, &mut text);
    text
}

/// [`rendered`] at the end of `out`, a buffer its caller reuses.
pub(crate) fn push_rendered(value: &minijinja::Value, out: &mut String) {
    use std::fmt::Write;
    match value.as_str() {
        Some(text) if value.kind() == minijinja::value::ValueKind::String => out.push_str(text),
        // Writing to a String cannot fail.
        _ => write!(out, "{value}").unwrap_or(()),
    }
}

/// Where a template's `{{ row.field }}` found its field's column in a CSV row last time
/// (`interpreter/feeder.rs`, `Columns::place_hinted`): a guess checked by the column's name at
/// each use, so that a wrong one (another feeder's layout) only costs the search it saves. The
/// search (a binary search of the names) was a tenth of a CSV-fed SQL transaction's client
/// instructions.
#[derive(Debug, Default)]
pub(crate) struct ColumnHint(pub(crate) std::sync::atomic::AtomicUsize);

impl Clone for ColumnHint {
    fn clone(&self) -> Self {
        Self(std::sync::atomic::AtomicUsize::new(self.0.load(std::sync::atomic::Ordering::Relaxed)))
    }
}

/// A guess is no part of what a template means.
impl PartialEq for ColumnHint {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Direct {
    /// The direct form of a template's source, when it is exactly `{{ expression }}` (no text
    /// around it, no whitespace control) of one of the two shapes.
    pub fn of(source: &str) -> Option<Direct> {
        let inner = source.strip_prefix("{{")?.strip_suffix("}}")?.trim();
        if inner.contains(['{', '}']) {
            return None;
        }
        if let Some(arguments) = inner.strip_prefix("random_int(").and_then(|rest| rest.strip_suffix(')')) {
            let (low, high) = arguments.split_once(',')?;
            let (low, high): (i64, i64) = (low.trim().parse().ok()?, high.trim().parse().ok()?);
            return (low <= high).then_some(Direct::RandomInt { low, high });
        }
        let (name, field) = match inner.split_once('.') {
            Some((name, field)) => (name, Some(field)),
            None => (inner, None),
        };
        let identifier = |word: &str| is_identifier(word) && !EXPRESSION_WORDS.contains(&word);
        (identifier(name) && field.is_none_or(identifier)).then(|| Direct::Var {
            name: name.to_owned(),
            field: field.map(minijinja::Value::from),
            column: ColumnHint::default(),
        })
    }
}

/// A JSON body with templated strings.
#[derive(Debug, Clone)]
pub(crate) enum JsonTemplate {
    Fixed(serde_json::Value),
    /// A string that is a single `{{ expression }}`: its value keeps its JSON type.
    Typed(String),
    Text(String),
    Array(Vec<JsonTemplate>),
    Object(Vec<(String, JsonTemplate)>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_lone_variable_or_random_int_is_direct() {
        let var = |name: &str, field: Option<&str>| {
            Some(Direct::Var {
                name: name.into(),
                field: field.map(minijinja::Value::from),
                column: ColumnHint::default(),
            })
        };
        assert_eq!(Direct::of("{{ t.aid }}"), var("t", Some("aid")));
        assert_eq!(Direct::of("{{token}}"), var("token", None));
        assert_eq!(Direct::of("{{ random_int(1, 100000) }}"), Some(Direct::RandomInt { low: 1, high: 100000 }));
        assert_eq!(Direct::of("{{ random_int(-5,5) }}"), Some(Direct::RandomInt { low: -5, high: 5 }));
        for other in [
            "id-{{ t.aid }}",
            "{{ t.aid }} ",
            "{{- t -}}",
            "{{ t.a.b }}",
            "{{ t['a'] }}",
            "{{ none }}",
            "{{ a + 1 }}",
            "{{ random_int(5, 1) }}",
            "{{ random_int(n, 5) }}",
            "{{ 1x }}",
            "{{ a }}{{ b }}",
        ] {
            assert_eq!(Direct::of(other), None, "{other}");
        }
    }

    /// A direct rendering prints what minijinja prints for the same value.
    #[test]
    fn direct_renderings_match_the_template_engine() {
        let environment = horde_plan::templates::environment();
        let row =
            minijinja::Value::from_serialize(serde_json::json!({"aid": "17", "n": 3, "f": 1.5, "b": true, "z": null}));
        for field in ["aid", "n", "f", "b", "z"] {
            let engine = environment
                .render_str(&format!("{{{{ t.{field} }}}}"), minijinja::context! { t => row.clone() })
                .unwrap();
            assert_eq!(super::rendered(&row.get_item(&minijinja::Value::from(field)).unwrap()), engine, "{field}");
        }
        assert_eq!(
            super::rendered(&minijinja::Value::from("it's")),
            environment.render_str("{{ s }}", minijinja::context! { s => "it's" }).unwrap()
        );
    }
}
