//! What names a secret: the one rule by which Horde keeps credentials out of what it writes.
//!
//! The engine applies it to the exchanges it records (a header, a query field or a variable so
//! named is redacted); the control plane asks it through the binding (`horde._engine.is_secret_name`,
//! `is_secret_query_field`) when it redacts a stored plan, a run's URLs and what `horde profile`
//! reads from logs. Written here only.

/// Name segments (split on `-`, `_`, `.`, whitespace and camelCase) that mark a credential.
const SECRET_SEGMENTS: &[&str] = &[
    "auth",
    "authorization",
    "authentication",
    "key",
    "apikey",
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "pass",
    "passphrase",
    "session",
    "sessionid",
    "sid",
    "cookie",
    "credential",
    "credentials",
    "signature",
    "sig",
    "jwt",
    "bearer",
    "otp",
    "pin",
    "private",
];

/// Words that mark a credential inside a longer segment (`X-APIKEY`, `accesstoken`).
const SECRET_WORDS: &[&str] =
    &["token", "secret", "password", "passwd", "apikey", "session", "credential", "cookie", "auth"];

/// Query fields that carry a one-time credential under a plain name, in OAuth and signed-URL
/// flows: a callback's `?code=` is as good as a password while it lasts.
const ONE_TIME_QUERY_FIELDS: &[&str] = &["code", "state", "nonce", "hash"];

/// Whether a header, query field, body field, variable or parameter called `name` carries a
/// credential: one of its segments (split on `-`, `_`, `.`, whitespace and camelCase) is a
/// credential word, or it holds one (`X-APIKEY`).
///
/// ```
/// use horde_plan::secrets::is_secret_name;
/// let names = ["X-Auth", "Api_Key", "X-Access-Key", "access_token", "sessionId", "Accept", "page"];
/// let secret: Vec<bool> = names.iter().map(|name| is_secret_name(name)).collect();
/// assert_eq!(secret, [true, true, true, true, true, false, false]);
/// ```
pub fn is_secret_name(name: &str) -> bool {
    let lowered = name.to_lowercase();
    if SECRET_WORDS.iter().any(|word| lowered.contains(word)) {
        return true;
    }
    let mut split = String::with_capacity(name.len() + 4);
    let mut previous_lower = false;
    for character in name.chars() {
        if character.is_ascii_uppercase() && previous_lower {
            split.push('_');
        }
        previous_lower = character.is_ascii_lowercase();
        split.extend(character.to_lowercase());
    }
    split
        .split(|character: char| matches!(character, '-' | '_' | '.') || character.is_whitespace())
        .filter(|segment| !segment.is_empty())
        .any(|segment| SECRET_SEGMENTS.contains(&segment))
}

/// Whether a query field (a form field, or a path segment naming what follows it) called `name`
/// holds a secret: a credential name, or a one-time credential's field.
///
/// ```
/// use horde_plan::secrets::is_secret_query_field;
/// let fields = ["access_token", "sig", "Session", "code", "page", "q"];
/// let secret: Vec<bool> = fields.iter().map(|name| is_secret_query_field(name)).collect();
/// assert_eq!(secret, [true, true, true, true, false, false]);
/// ```
pub fn is_secret_query_field(name: &str) -> bool {
    is_secret_name(name) || ONE_TIME_QUERY_FIELDS.iter().any(|field| name.eq_ignore_ascii_case(field))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_split_on_separators_whitespace_and_camel_case() {
        assert!(is_secret_name("clientPin"));
        assert!(is_secret_name("x sig"));
        assert!(is_secret_name("PRIVATE.KEY"));
        assert!(!is_secret_name("pinned"));
        assert!(!is_secret_name("keyboard"));
        assert!(!is_secret_name(""));
    }

    #[test]
    fn one_time_fields_are_secret_only_in_a_query() {
        assert!(!is_secret_name("state"));
        assert!(is_secret_query_field("State"));
        assert!(!is_secret_query_field("statement"));
    }
}
