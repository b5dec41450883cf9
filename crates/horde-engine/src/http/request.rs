//! Requests encoded once per plan: a step's request line, headers and body are the same bytes on
//! every iteration in plan v1, so they are written once and sent as one buffer.

use super::Endpoint;
use horde_plan::HttpStep;

/// The bytes of one step's request, ready to write.
#[derive(Debug, Clone)]
pub struct EncodedRequest {
    pub bytes: Vec<u8>,
    /// HEAD responses carry no body whatever their headers say.
    pub is_head: bool,
}

impl EncodedRequest {
    /// Encodes a step. Step headers override the target's headers of the same name
    /// (case-insensitively); `Host`, `Content-Length` and `User-Agent` are added when absent.
    pub fn encode(endpoint: &Endpoint, target_headers: &[(String, String)], step: &HttpStep) -> Self {
        let mut headers: Vec<(&str, &str)> = Vec::new();
        for (name, value) in target_headers.iter().chain(step.headers.iter()) {
            headers.retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
            headers.push((name, value));
        }
        let has = |wanted: &str| headers.iter().any(|(name, _)| name.eq_ignore_ascii_case(wanted));
        let mut text = format!("{} {}{} HTTP/1.1\r\n", step.method, endpoint.path_prefix, step.path);
        if !has("host") {
            text.push_str(&format!("Host: {}\r\n", endpoint.host_header));
        }
        if !has("user-agent") {
            text.push_str(concat!("User-Agent: horde/", env!("CARGO_PKG_VERSION"), "\r\n"));
        }
        for (name, value) in &headers {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        let body = step.body.as_deref().unwrap_or("");
        let needs_length = !body.is_empty() || matches!(step.method.as_str(), "POST" | "PUT" | "PATCH");
        if needs_length && !has("content-length") {
            text.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        text.push_str("\r\n");
        text.push_str(body);
        Self { bytes: text.into_bytes(), is_head: step.method == "HEAD" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_with_overrides() {
        let endpoint = Endpoint::parse("http://127.0.0.1:8080/api").unwrap();
        let step = HttpStep {
            name: "post".into(),
            method: "POST".into(),
            path: "/items".into(),
            headers: vec![("Accept".into(), "text/plain".into())],
            body: Some("{}".into()),
            think_time: None,
        };
        let target_headers = vec![("accept".into(), "application/json".into()), ("X-Run".into(), "1".into())];
        let text = String::from_utf8(EncodedRequest::encode(&endpoint, &target_headers, &step).bytes).unwrap();
        assert!(text.starts_with("POST /api/items HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"), "{text}");
        assert!(text.contains("X-Run: 1\r\nAccept: text/plain\r\n"), "{text}");
        assert!(!text.contains("application/json"));
        assert!(text.ends_with("Content-Length: 2\r\n\r\n{}"), "{text}");
    }
}
