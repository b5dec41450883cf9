//! A VU's cookie jar: what `Set-Cookie` said, sent back on later requests to matching paths.
//! One VU talks to one target, so cookies are kept by name and path (no domain matching).

#[derive(Debug, Clone)]
struct Cookie {
    name: String,
    value: String,
    path: String,
}

#[derive(Debug, Default)]
pub(crate) struct CookieJar {
    cookies: Vec<Cookie>,
}

impl CookieJar {
    pub fn is_empty(&self) -> bool {
        self.cookies.is_empty()
    }

    /// Takes one `Set-Cookie` value received for `request_path`.
    pub fn store(&mut self, set_cookie: &str, request_path: &str) {
        let mut attributes = set_cookie.split(';');
        let Some((name, value)) = attributes.next().and_then(|pair| pair.split_once('=')) else { return };
        let name = name.trim();
        if name.is_empty() {
            return;
        }
        let mut path = default_path(request_path).to_owned();
        let mut expired = false;
        for attribute in attributes {
            let (key, attribute_value) = attribute.split_once('=').unwrap_or((attribute, ""));
            let key = key.trim();
            if key.eq_ignore_ascii_case("path") && attribute_value.trim().starts_with('/') {
                path = attribute_value.trim().to_owned();
            } else if key.eq_ignore_ascii_case("max-age") {
                expired = attribute_value.trim().parse::<i64>().is_ok_and(|seconds| seconds <= 0);
            }
        }
        self.cookies.retain(|cookie| !(cookie.name == name && cookie.path == path));
        if !expired {
            self.cookies.push(Cookie { name: name.to_owned(), value: value.trim().to_owned(), path });
        }
    }

    /// The `Cookie` header value for a request to `prefix` + `path` (the base URL's path prefix
    /// and the step's path), if any cookie applies.
    pub fn header_for(&self, prefix: &str, path: &str) -> Option<String> {
        if self.cookies.is_empty() {
            return None;
        }
        let joined;
        let full_path = if prefix.is_empty() {
            path
        } else {
            joined = format!("{prefix}{path}");
            &joined
        };
        let mut header = String::new();
        for cookie in self.cookies.iter().filter(|cookie| path_matches(&cookie.path, full_path)) {
            if !header.is_empty() {
                header.push_str("; ");
            }
            header.push_str(&cookie.name);
            header.push('=');
            header.push_str(&cookie.value);
        }
        (!header.is_empty()).then_some(header)
    }
}

/// RFC 6265 §5.1.4: the directory of the request path.
fn default_path(request_path: &str) -> &str {
    let path = request_path.split('?').next().unwrap_or("/");
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(index) => &path[..index],
    }
}

fn path_matches(cookie_path: &str, request_path: &str) -> bool {
    request_path.starts_with(cookie_path)
        && (cookie_path.ends_with('/')
            || request_path.len() == cookie_path.len()
            || request_path[cookie_path.len()..].starts_with(['/', '?']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jar_by_name_and_path() {
        let mut jar = CookieJar::default();
        jar.store("session=abc; Path=/game; HttpOnly", "/game/login");
        jar.store("theme=dark", "/settings/page");
        assert_eq!(jar.header_for("", "/game/city").as_deref(), Some("session=abc"));
        assert_eq!(jar.header_for("", "/gamex"), None);
        assert_eq!(jar.header_for("", "/settings/x").as_deref(), Some("theme=dark"));
        jar.store("session=def; Path=/game", "/game/login");
        assert_eq!(jar.header_for("", "/game").as_deref(), Some("session=def"));
        jar.store("session=; Path=/game; Max-Age=0", "/game/logout");
        assert_eq!(jar.header_for("", "/game/city"), None);
    }
}
