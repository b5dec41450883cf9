//! Why a request's templates could not be rendered, in words: the error detail of a
//! `template_failed` request.

use super::Vu;
use crate::run::worker_state::WorkerState;
use crate::scenario::interpreter::{Body, RequestNode};
use crate::template::{JsonTemplate, Text};
use minijinja::Value;

impl Vu {
    /// Why a request's templates could not be rendered: the first variable they read that the
    /// VU does not hold, else the template engine's own message.
    pub(super) fn template_failure(&mut self, state: &WorkerState, node: &RequestNode) -> String {
        fn json_names<'n>(template: &'n JsonTemplate, names: &mut Vec<&'n str>) {
            match template {
                JsonTemplate::Fixed(_) => {}
                JsonTemplate::Typed(name) | JsonTemplate::Text(name) => names.push(name),
                JsonTemplate::Array(items) => items.iter().for_each(|item| json_names(item, names)),
                JsonTemplate::Object(fields) => fields.iter().for_each(|(_, item)| json_names(item, names)),
            }
        }
        let mut names: Vec<(&str, &str)> = Vec::new();
        if let Text::Template(template) = &node.path {
            names.push(("path", &template.name));
        }
        for (header, value) in &node.headers {
            if let Text::Template(template) = value {
                names.push((header, &template.name));
            }
        }
        match &node.body {
            Body::Text(Text::Template(template)) => names.push(("body", &template.name)),
            Body::Json(template) => {
                let mut json = Vec::new();
                json_names(template, &mut json);
                names.extend(json.into_iter().map(|name| ("json", name)));
            }
            _ => {}
        }
        let context = self.context(state);
        let environment = &state.shared.plan.environment;
        for (part, name) in &names {
            let Ok(template) = environment.get_template(name) else { continue };
            let mut variables: Vec<String> = template.undeclared_variables(true).into_iter().collect();
            variables.sort();
            for variable in variables {
                let mut value = context.clone();
                for (depth, attribute) in variable.split('.').enumerate() {
                    value = value.get_attr(attribute).unwrap_or(Value::UNDEFINED);
                    if value.is_undefined() {
                        let unset = variable.split('.').take(depth + 1).collect::<Vec<_>>().join(".");
                        return format!("{part}: variable '{unset}' is not set");
                    }
                }
            }
            if let Err(error) = template.render(&context) {
                return format!("{part}: {error}");
            }
        }
        "a rendered header value holds a line break".into()
    }
}
