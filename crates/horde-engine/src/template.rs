//! A step's templated text, as compiled: fixed, or a template of the plan's environment looked
//! up by name when a VU renders it. The HTTP, SQL and message steps all hold their templated
//! parts in these types; the VU renders them (`vu.rs`, `vu/http_step.rs`).

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
