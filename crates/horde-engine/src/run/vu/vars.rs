//! A VU's variables (extracted values, loop items, feeder rows) and how templates see them.
//!
//! A small map kept in a `Vec` in the order the names were first set, not a `BTreeMap`: a VU
//! holds a handful of variables, and a B-tree's first node has room for eleven whatever the
//! count (about 540 bytes for one `token`), paid once per VU: 80 MB at 150,000 players
//! (`bench/FIGURES.md`, "VU density"). Looking a name up in a few entries costs what a B-tree's
//! search does.

use minijinja::value::{Enumerator, Object, ObjectRepr, Value};
use std::sync::Arc;

#[derive(Debug, Clone, Default)]
pub(crate) struct Vars {
    entries: Vec<(String, Value)>,
}

impl Vars {
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.entries.iter().find(|(key, _)| key == name).map(|(_, value)| value)
    }

    /// Sets `name`, in its place if it was set before. The name is copied only the first time:
    /// a feeder's row is set again at every iteration, and a copy each time was an allocation
    /// and a free per transaction (issue 19).
    pub fn insert(&mut self, name: &str, value: Value) {
        match self.entries.iter_mut().find(|(key, _)| key == name) {
            Some((_, slot)) => *slot = value,
            None => {
                // Grown one entry at a time: most VUs set one to three variables.
                self.entries.reserve_exact(1);
                self.entries.push((name.to_owned(), value));
            }
        }
    }

    pub fn remove(&mut self, name: &str) {
        self.entries.retain(|(key, _)| key != name);
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.entries.iter().map(|(key, value)| (key, value))
    }
}

/// Templates see the variables as a map (merged under the built-ins, see `Vu::context`).
impl Object for Vars {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.get(key.as_str()?).cloned()
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.entries.iter().map(|(key, _)| Value::from(key.as_str())).collect())
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variable_set_again_keeps_its_place_and_templates_see_every_one() {
        let mut vars = Vars::default();
        vars.insert("token", Value::from("abc"));
        vars.insert("id", Value::from(7));
        vars.insert("token", Value::from("def"));
        assert_eq!(vars.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>(), ["token", "id"]);
        assert_eq!(vars.get("token"), Some(&Value::from("def")));
        let shared = Value::from_dyn_object(Arc::new(vars.clone()));
        let mut environment = minijinja::Environment::new();
        environment.add_template("t", "{{ token }}/{{ id }}/{% if missing is undefined %}unset{% endif %}").unwrap();
        let context = minijinja::value::merge_maps([shared, minijinja::context! { vu => 3 }]);
        assert_eq!(environment.get_template("t").unwrap().render(&context).unwrap(), "def/7/unset");
        vars.remove("token");
        assert_eq!(vars.get("token"), None);
        assert_eq!(vars.iter().count(), 1);
    }
}
