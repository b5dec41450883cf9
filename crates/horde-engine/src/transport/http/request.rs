//! Writing a request's bytes. Requests whose every part is fixed are encoded once per plan;
//! templated ones (and any request carrying cookies) are encoded per send into the VU's buffer.

use super::Endpoint;

/// What goes into one request, already rendered.
#[derive(Debug, Clone, Copy)]
pub struct RequestParts<'a> {
    pub method: &'a str,
    /// The step's path, joined after the endpoint's prefix.
    pub path: &'a str,
    /// Headers in order of precedence lowest first: a later header replaces an earlier one of
    /// the same name (case-insensitively).
    pub headers: &'a [(&'a str, &'a str)],
    /// The `Cookie` header value from the VU's jar, if it has any cookie for this path.
    pub cookie: Option<&'a str>,
    pub body: &'a [u8],
    /// Adds `Content-Type: application/json` unless a header sets a content type.
    pub json: bool,
}

/// Appends the encoded request to `out`. `Host`, `User-Agent` and `Content-Length` are added
/// when absent.
pub fn encode_request(out: &mut Vec<u8>, endpoint: &Endpoint, parts: &RequestParts<'_>) {
    let mut headers: Vec<(&str, &str)> = Vec::with_capacity(parts.headers.len() + 2);
    for &(name, value) in parts.headers {
        headers.retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
        headers.push((name, value));
    }
    let has = |wanted: &str| headers.iter().any(|(name, _)| name.eq_ignore_ascii_case(wanted));
    let mut push = |text: &str| out.extend_from_slice(text.as_bytes());
    push(parts.method);
    push(" ");
    push(&endpoint.path_prefix);
    push(parts.path);
    push(" HTTP/1.1\r\n");
    if !has("host") {
        push("Host: ");
        push(&endpoint.host_header);
        push("\r\n");
    }
    if !has("user-agent") {
        push(concat!("User-Agent: horde/", env!("CARGO_PKG_VERSION"), "\r\n"));
    }
    if parts.json && !has("content-type") {
        push("Content-Type: application/json\r\n");
    }
    for (name, value) in &headers {
        push(name);
        push(": ");
        push(value);
        push("\r\n");
    }
    if let Some(cookie) = parts.cookie {
        push("Cookie: ");
        push(cookie);
        push("\r\n");
    }
    let needs_length = !parts.body.is_empty() || matches!(parts.method, "POST" | "PUT" | "PATCH");
    if needs_length && !has("content-length") {
        push("Content-Length: ");
        push(&parts.body.len().to_string());
        push("\r\n");
    }
    push("\r\n");
    out.extend_from_slice(parts.body);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_with_overrides() {
        let endpoint = Endpoint::parse("http://127.0.0.1:8080/api").unwrap();
        let headers = [("accept", "application/json"), ("X-Run", "1"), ("Accept", "text/plain")];
        let mut out = Vec::new();
        let parts = RequestParts {
            method: "POST",
            path: "/items",
            headers: &headers,
            cookie: Some("a=1"),
            body: b"{}",
            json: true,
        };
        encode_request(&mut out, &endpoint, &parts);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("POST /api/items HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"), "{text}");
        assert!(
            text.contains("Content-Type: application/json\r\nX-Run: 1\r\nAccept: text/plain\r\nCookie: a=1\r\n"),
            "{text}"
        );
        assert!(!text.contains("application/json\r\nX-Run") || !text.contains("accept: application/json"));
        assert!(text.ends_with("Content-Length: 2\r\n\r\n{}"), "{text}");
    }
}
