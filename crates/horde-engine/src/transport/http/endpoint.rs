//! Where requests go: the target's scheme, host, port and path prefix, from `target.base_url`.

use crate::error::EngineError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

/// The parsed `base_url` of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub scheme: Scheme,
    /// Host name or IP literal, without brackets for IPv6.
    pub host: String,
    pub port: u16,
    /// Prefix joined before every step's path, without a trailing slash ("" or "/api").
    pub path_prefix: String,
    /// The `Host` header value (host, and port when it is not the scheme's default).
    pub host_header: String,
}

impl Endpoint {
    pub fn parse(base_url: &str) -> Result<Self, EngineError> {
        let invalid = |why: &str| EngineError::Setup(format!("target.base_url '{base_url}': {why}"));
        let (scheme, rest) = if let Some(rest) = base_url.strip_prefix("http://") {
            (Scheme::Http, rest)
        } else if let Some(rest) = base_url.strip_prefix("https://") {
            (Scheme::Https, rest)
        } else {
            return Err(invalid("must start with http:// or https://"));
        };
        let (authority, path) = match rest.find('/') {
            Some(index) => (&rest[..index], &rest[index..]),
            None => (rest, ""),
        };
        let default_port = if scheme == Scheme::Https { 443 } else { 80 };
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            let end = bracketed.find(']').ok_or_else(|| invalid("unclosed '[' in IPv6 host"))?;
            let port = match &bracketed[end + 1..] {
                "" => default_port,
                tail => tail.strip_prefix(':').and_then(|p| p.parse().ok()).ok_or_else(|| invalid("bad port"))?,
            };
            (bracketed[..end].to_owned(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host.to_owned(), port.parse().map_err(|_| invalid("bad port"))?),
                None => (authority.to_owned(), default_port),
            }
        };
        if host.is_empty() {
            return Err(invalid("has no host"));
        }
        let host_header =
            if port == default_port { authority_host(&host) } else { format!("{}:{port}", authority_host(&host)) };
        Ok(Self { scheme, host, port, path_prefix: path.trim_end_matches('/').to_owned(), host_header })
    }
}

fn authority_host(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        let endpoint = Endpoint::parse("http://127.0.0.1:8080/api/").unwrap();
        assert_eq!((endpoint.scheme, endpoint.host.as_str(), endpoint.port), (Scheme::Http, "127.0.0.1", 8080));
        assert_eq!(endpoint.path_prefix, "/api");
        assert_eq!(endpoint.host_header, "127.0.0.1:8080");
        let tls = Endpoint::parse("https://localhost").unwrap();
        assert_eq!((tls.port, tls.host_header.as_str(), tls.path_prefix.as_str()), (443, "localhost", ""));
        let v6 = Endpoint::parse("http://[::1]:9000").unwrap();
        assert_eq!((v6.host.as_str(), v6.host_header.as_str()), ("::1", "[::1]:9000"));
        assert!(Endpoint::parse("ftp://x").is_err());
        assert!(Endpoint::parse("http://:80").is_err());
    }
}
