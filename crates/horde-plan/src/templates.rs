//! Templates and expressions: the minijinja environment that plan validation and the engine
//! share, so a template that passes the check is one the engine can render.
//!
//! Context names every template may use: the VU's variables (extracted values, loop items,
//! feeder rows), `params`, `vu`, `iteration`, and the functions `random_int(low, high)`,
//! `random_choice(list)`, `uuid()`, `now_ms()`.

use minijinja::value::Value;
use minijinja::{Environment, Error, ErrorKind};
use std::cell::Cell;
use std::collections::HashSet;

/// Names every template may use besides the scenario's own variables.
pub const BUILTIN_NAMES: [&str; 7] = ["params", "vu", "iteration", "random_int", "random_choice", "uuid", "now_ms"];

/// Words the expression language reads as literals or operators, never as a variable.
pub const EXPRESSION_WORDS: [&str; 13] =
    ["true", "false", "none", "True", "False", "None", "and", "or", "not", "in", "is", "if", "else"];

/// What a template's `for` loop is called inside it: no variable can take the name either.
const LOOP_NAME: &str = "loop";

/// A name made of ASCII letters, digits and '_', not starting with a digit.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(first) if first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why `name` cannot name a variable the templates read (an extractor's `var`, a loop's `as`, a
/// feeder's `name`; `what` says which, e.g. "feeder name"): the problem and its hint, or None.
/// The one rule: the plan's check applies it, and the plan's Python types ask it through the
/// binding (`horde._engine.variable_name_problem`) when a plan is built in code.
pub fn variable_name_problem(name: &str, what: &str) -> Option<(String, String)> {
    if !is_identifier(name) {
        return Some((
            format!("{what} '{name}' is not a valid variable name"),
            "use letters, digits and '_', not starting with a digit, e.g. 'building_id'; templates refer to it as \
             {{ building_id }}"
                .to_owned(),
        ));
    }
    if BUILTIN_NAMES.contains(&name) || EXPRESSION_WORDS.contains(&name) || name == LOOP_NAME {
        let mut reserved: Vec<&str> = BUILTIN_NAMES.iter().chain(EXPRESSION_WORDS.iter()).copied().collect();
        reserved.push(LOOP_NAME);
        reserved.sort_unstable();
        return Some((
            format!("{what} '{name}' is a name templates already use"),
            format!("pick another name; reserved: {}", reserved.join(", ")),
        ));
    }
    None
}

/// Whether `text` needs rendering at all (most paths and bodies are constant: they are sent as
/// they are, without touching the template engine).
pub fn is_template(text: &str) -> bool {
    text.contains("{{") || text.contains("{%") || text.contains("{#")
}

/// The environment with Horde's functions. Templates render plain text: no HTML escaping.
pub fn environment() -> Environment<'static> {
    let mut environment = Environment::new();
    environment.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    environment.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    environment.add_function("random_int", random_int);
    environment.add_function("random_choice", random_choice);
    environment.add_function("uuid", uuid);
    environment.add_function("now_ms", now_ms);
    environment
}

/// Checks a template's syntax; returns the variables it reads that it does not define itself.
pub fn template_variables(environment: &Environment<'static>, source: &str) -> Result<HashSet<String>, String> {
    let template = environment.template_from_str(source).map_err(|error| describe(&error))?;
    Ok(template.undeclared_variables(false))
}

/// Checks an expression's syntax (conditions of `if` and `while`); returns the variables it reads.
pub fn expression_variables(environment: &Environment<'static>, source: &str) -> Result<HashSet<String>, String> {
    let expression = environment.compile_expression(source).map_err(|error| describe(&error))?;
    Ok(expression.undeclared_variables(false))
}

fn describe(error: &Error) -> String {
    match error.detail() {
        Some(detail) => format!("{}: {detail}", error.kind()),
        None => error.kind().to_string(),
    }
}

thread_local! {
    // Each thread draws from its own stream: no locking, and runs are reproducible per thread.
    static RANDOM: Cell<u64> = Cell::new(0x853C_49E6_748F_EA9B ^ thread_seed());
}

fn thread_seed() -> u64 {
    let id = format!("{:?}", std::thread::current().id());
    id.bytes().fold(0xCBF2_9CE4_8422_2325u64, |hash, byte| (hash ^ byte as u64).wrapping_mul(0x100_0000_01B3))
}

/// One step of SplitMix64: advances `state` and returns the next output. Shared by the
/// templates' per-thread stream and the engine's per-VU streams.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The next value of the thread's stream.
pub fn next_random() -> u64 {
    RANDOM.with(|cell| {
        let mut state = cell.get();
        let value = splitmix64(&mut state);
        cell.set(state);
        value
    })
}

/// `random_int(low, high)`: uniform in [low, high] from the thread's stream (the engine calls it
/// directly for a parameter that is only this call: `horde_engine::template::Direct`).
pub fn random_int(low: i64, high: i64) -> Result<i64, Error> {
    if high < low {
        return Err(Error::new(ErrorKind::InvalidOperation, format!("random_int({low}, {high}): high is below low")));
    }
    let span = (high as i128 - low as i128 + 1) as u128;
    // The same draw in 64 bits when the span fits them (all but the whole i64 range): a 128-bit
    // remainder is a library call, a tenth of a SQL parameter's rendering.
    let offset = match u64::try_from(span) {
        Ok(span) => (next_random() % span) as i128,
        Err(_) => (next_random() as u128 % span) as i128,
    };
    Ok((low as i128 + offset) as i64)
}

fn random_choice(items: Value) -> Result<Value, Error> {
    let length = items.len().unwrap_or(0);
    if length == 0 {
        return Err(Error::new(ErrorKind::InvalidOperation, "random_choice of an empty or non-list value"));
    }
    items.get_item(&Value::from((next_random() % length as u64) as usize))
}

fn uuid() -> String {
    let high = next_random();
    let low = next_random();
    // Version 4 (random), variant 1 (RFC 9562).
    let high = (high & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000;
    let low = (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        high >> 32,
        (high >> 16) & 0xFFFF,
        high & 0xFFFF,
        low >> 48,
        low & 0xFFFF_FFFF_FFFF
    )
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_render() {
        let environment = environment();
        let rendered = environment
            .render_str("{{ random_int(3, 3) }} {{ random_choice([7]) }} {{ uuid() | length }} {{ now_ms() > 0 }}", ())
            .unwrap();
        assert_eq!(rendered, "3 7 36 True");
        let mut seen = HashSet::new();
        for _ in 0..1000 {
            let value = random_int(-2, 2).unwrap();
            assert!((-2..=2).contains(&value));
            seen.insert(value);
        }
        assert_eq!(seen.len(), 5, "every value of the span is drawn");
        // The whole i64 range (a span of 2^64, past the 64-bit draw) and its ends.
        let mut signs = HashSet::new();
        for _ in 0..200 {
            signs.insert(random_int(i64::MIN, i64::MAX).unwrap().signum());
        }
        assert!(signs.contains(&-1) && signs.contains(&1));
        assert_eq!(random_int(i64::MAX, i64::MAX).unwrap(), i64::MAX);
        assert_eq!(random_int(i64::MIN, i64::MIN).unwrap(), i64::MIN);
        assert!(random_int(i64::MIN, i64::MIN + 1).unwrap() <= i64::MIN + 1);
    }

    #[test]
    fn variables_and_syntax_errors() {
        let environment = environment();
        let names =
            template_variables(&environment, "/u/{{ user.id }}/{{ params.x }}{% for b in items %}{{ b }}{% endfor %}")
                .unwrap();
        assert_eq!(names, HashSet::from(["user".to_owned(), "params".to_owned(), "items".to_owned()]));
        assert!(template_variables(&environment, "{{ unclosed").is_err());
        assert_eq!(expression_variables(&environment, "gold > 100 and ready").unwrap().len(), 2);
        assert!(expression_variables(&environment, "gold >").is_err());
        assert!(!is_template("/plain/path"));
    }
}
