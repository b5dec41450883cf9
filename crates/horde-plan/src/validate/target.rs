//! The target's checks: its URLs (base_url and its instances) and how VUs reach it
//! (`connections`, `source_addresses`). The plan's Python types ask them (`target_problems`).

use super::Problems;
use crate::{
    Connections, HttpVersion, Target, MAX_H2_CONCURRENT_STREAMS, MAX_H2_WINDOW_BYTES, MAX_KEPT_BODY_BYTES,
    MAX_POOL_CONNECTIONS, MAX_RESPONSE_HEADER_BYTES, MIN_H2_CONNECTION_WINDOW_BYTES, MIN_RESPONSE_HEADER_BYTES,
};
use std::net::IpAddr;

/// What of a base URL must agree between the instances of a target (scheme, path prefix) and
/// what tells them apart (host and port).
struct TargetUrl<'a> {
    scheme: &'a str,
    /// Lower case, IPv6 without brackets: `http://H` and `http://h:80` are one instance.
    host: String,
    /// The scheme's default when the URL gives none.
    port: u16,
    /// Without its trailing slashes, as the engine joins it: `/api/` and `/api` are one prefix.
    prefix: &'a str,
}

/// `base_url`, then each of `instances` (located `target.instances[i]`): each a URL the engine
/// can reach; the instances with base_url's scheme and path prefix, and no instance twice.
pub(super) fn check_target_urls(problems: &mut Problems, base_url: &str, instances: &[String]) {
    let base = check_target_url(problems, "target.base_url".into(), base_url, "base_url");
    let mut seen: Vec<(String, u16, String)> = Vec::new();
    if let Some(base) = &base {
        seen.push((base.host.clone(), base.port, "base_url".into()));
    }
    for (index, url) in instances.iter().enumerate() {
        let path = format!("target.instances[{index}]");
        let Some(instance) = check_target_url(problems, path.clone(), url, "an instance") else { continue };
        if let Some(base) = &base {
            if instance.scheme != base.scheme {
                problems.push_hint(
                    path,
                    format!("'{url}' uses {}:// but base_url uses {}://", instance.scheme, base.scheme),
                    "the instances are one target behind one protocol; give each base_url's scheme",
                );
                continue;
            }
            if instance.prefix != base.prefix {
                problems.push_hint(
                    path,
                    format!(
                        "'{url}' has path prefix {} but base_url has {}",
                        describe_prefix(instance.prefix),
                        describe_prefix(base.prefix)
                    ),
                    "instances differ only in host and port; give each base_url's path prefix",
                );
                continue;
            }
        }
        match seen.iter().find(|(host, port, _)| *host == instance.host && *port == instance.port) {
            Some((_, _, first)) => problems.push_hint(
                path,
                format!("'{url}' is the same instance as {first}"),
                "list each instance once (base_url is the first instance; a port left out is the scheme's default)",
            ),
            None => seen.push((instance.host, instance.port, format!("instances[{index}]"))),
        }
    }
}

/// The hint under a URL that does not parse.
const URL_FORM: &str = "write it as scheme://host[:port][/prefix], e.g. 'http://127.0.0.1:8080'";

fn describe_prefix(prefix: &str) -> String {
    if prefix.is_empty() {
        "none".into()
    } else {
        format!("'{prefix}'")
    }
}

/// One URL of the target; its parts when it has no problem. `field` names it in messages. At
/// most one problem per URL, in the order pydantic finds them.
fn check_target_url<'a>(problems: &mut Problems, path: String, url: &'a str, field: &str) -> Option<TargetUrl<'a>> {
    let Some((scheme, rest)) = url.split_once("://").filter(|(scheme, _)| matches!(*scheme, "http" | "https")) else {
        let upper_case = url
            .split_once("://")
            .is_some_and(|(scheme, _)| scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https"));
        match url.split_once("://") {
            Some((scheme, rest)) if upper_case => problems.push_hint(
                path,
                format!("'{url}' writes its scheme in upper case: write http:// or https://"),
                format!("write '{}://{rest}'", scheme.to_ascii_lowercase()),
            ),
            Some((scheme, _)) => problems.push_hint(
                path,
                format!("'{url}' uses scheme '{}'; only http and https are supported", scheme.to_ascii_lowercase()),
                "use an http:// or https:// URL",
            ),
            None => problems.push_hint(
                path,
                format!("'{url}' has no http:// or https:// scheme"),
                "write the full URL, e.g. 'http://127.0.0.1:8080'",
            ),
        }
        return None;
    };
    let (authority, prefix) = match rest.find(['/', '?', '#']) {
        Some(index) => (&rest[..index], &rest[index..]),
        None => (rest, ""),
    };
    let (credentials, host_and_port) = match authority.rsplit_once('@') {
        Some((credentials, host_and_port)) => (Some(credentials), host_and_port),
        None => (None, authority),
    };
    let (host, port) = match host_and_port.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((host, tail)) => (host, tail.strip_prefix(':')),
            None => {
                problems.push_hint(path, format!("'{url}' is not a valid URL (unclosed '[' in IPv6 host)"), URL_FORM);
                return None;
            }
        },
        None => match host_and_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_and_port, None),
        },
    };
    let default_port = if scheme == "https" { 443 } else { 80 };
    let port = match port.map(str::parse::<u16>) {
        None => default_port,
        // `http://h:` (a colon and no number) is a port left out by mistake, not the default.
        Some(Err(_)) if port == Some("") => {
            problems.push_hint(
                path,
                format!("'{url}' has an empty port (a ':' with no number after it)"),
                "write the port the target listens on, e.g. 'http://127.0.0.1:8080', or leave out the ':' for the \
                 scheme's default port",
            );
            return None;
        }
        Some(Ok(port)) => port,
        Some(Err(_)) => {
            problems.push_hint(path, format!("'{url}' is not a valid URL (bad port)"), URL_FORM);
            return None;
        }
    };
    if host.is_empty() {
        problems.push_hint(
            path,
            format!("'{url}' has no host"),
            "put the host after the scheme, e.g. 'http://127.0.0.1:8080'",
        );
        return None;
    }
    if let Some(why) = host_problem(host, host_and_port.starts_with('[')) {
        problems.push_hint(
            path,
            format!("'{url}' has an invalid host '{host}' ({why})"),
            "write a host name (letters, digits, '-', '.'), an IPv4 address, or an IPv6 address in brackets, e.g. \
             'http://[::1]:8080'",
        );
        return None;
    }
    if port == 0 {
        problems.push_hint(path, format!("'{url}' has port 0"), "use the port the target listens on");
        return None;
    }
    if credentials.is_some() {
        // The engine does not send URL credentials, and they would be stored with the run.
        problems.push_hint(
            path,
            format!("{field} must not carry credentials (user:password@)"),
            "send them as a header instead, e.g. headers: {Authorization: 'Basic ...'}; secret headers are redacted \
             in the store",
        );
        return None;
    }
    if rest.contains(['?', '#']) {
        problems.push_hint(
            path,
            format!("'{url}' has a query or fragment"),
            format!("keep {field} to scheme, host, port and path prefix; put query strings in each step's path"),
        );
        return None;
    }
    Some(TargetUrl { scheme, host: host.to_ascii_lowercase(), port, prefix: prefix.trim_end_matches('/') })
}

/// Why a URL's host cannot be connected to as written, if it cannot: an IPv6 literal (in
/// brackets) that does not parse; a name with a space or another character no host name has,
/// an empty label, a label starting or ending with `-` (`-bad-.com`), or a trailing dot
/// (`example.com.` would go to the system resolver as an absolute name, and differ from
/// `example.com` in the Host header and TLS name).
pub(crate) fn host_problem(host: &str, bracketed: bool) -> Option<&'static str> {
    if bracketed {
        return host.parse::<std::net::Ipv6Addr>().is_err().then_some("not an IPv6 address");
    }
    if host.chars().any(|character| character.is_whitespace() || character.is_control()) {
        return Some("it contains a space or a control character");
    }
    if host.ends_with('.') {
        return Some("it ends with a dot");
    }
    if !host.chars().all(|character| character.is_ascii_alphanumeric() || matches!(character, '-' | '.' | '_')) {
        return Some(
            "a host name has only ASCII letters, digits, '-', '_' and '.'; write an international name as xn--...",
        );
    }
    if host.split('.').any(str::is_empty) {
        return Some("it has an empty label between dots");
    }
    if host.split('.').any(|label| label.starts_with('-') || label.ends_with('-')) {
        return Some("a label starts or ends with '-' (no resolver looks such a name up)");
    }
    None
}

/// `connections` (a pool's size) and `source_addresses` (IP literals, each once, of the
/// family of the target's address when the target is given by address).
pub(super) fn check_connections(problems: &mut Problems, target: &Target) {
    if let Connections::Pool(size) = target.connections {
        if size == 0 {
            problems.push_hint(
                "target.connections.pool".into(),
                "must be at least 1 (got 0)",
                "a pool holds at least one connection; per_vu gives each VU its own",
            );
        } else if size > MAX_POOL_CONNECTIONS {
            problems.push_hint(
                "target.connections.pool".into(),
                format!("must be at most {MAX_POOL_CONNECTIONS} (got {size})"),
                "one process cannot hold more; use more generator processes",
            );
        }
    }
    check_http_version(problems, target);
    let header_bytes = target.max_response_header_bytes;
    if !(MIN_RESPONSE_HEADER_BYTES..=MAX_RESPONSE_HEADER_BYTES).contains(&header_bytes) {
        problems.push(
            "target.max_response_header_bytes".into(),
            format!("must be from {MIN_RESPONSE_HEADER_BYTES} to {MAX_RESPONSE_HEADER_BYTES} (got {header_bytes})"),
        );
    }
    let body_bytes = target.max_kept_body_bytes;
    if !(1..=MAX_KEPT_BODY_BYTES).contains(&body_bytes) {
        problems.push(
            "target.max_kept_body_bytes".into(),
            format!("must be from 1 to {MAX_KEPT_BODY_BYTES} (got {body_bytes})"),
        );
    }
    let parallel = target.parallel_connections;
    if !(1..=crate::MAX_PARALLEL_CONNECTIONS).contains(&parallel) {
        problems.push(
            "target.parallel_connections".into(),
            format!("must be from 1 to {} (got {parallel})", crate::MAX_PARALLEL_CONNECTIONS),
        );
    }
    let target_families: Vec<bool> = std::iter::once(&target.base_url)
        .chain(&target.instances)
        .filter_map(|url| url_ip(url))
        .map(|ip| ip.is_ipv4())
        .collect();
    let mut seen: Vec<IpAddr> = Vec::new();
    for (index, text) in target.source_addresses.iter().enumerate() {
        let path = format!("target.source_addresses[{index}]");
        let Ok(address) = text.parse::<IpAddr>() else {
            problems.push_hint(
                path,
                format!("'{text}' is not an IP address"),
                "write IP addresses of this machine, e.g. '127.0.0.2' (names are not resolved here)",
            );
            continue;
        };
        if seen.contains(&address) {
            problems.push_hint(path, format!("'{text}' is listed twice"), "list each address once");
            continue;
        }
        seen.push(address);
        if target_families.iter().any(|&ipv4| ipv4 != address.is_ipv4()) {
            let (own, other) = if address.is_ipv4() { ("IPv4", "IPv6") } else { ("IPv6", "IPv4") };
            problems.push_hint(
                path,
                format!("'{text}' is an {own} address but the target is reached over {other}"),
                format!("give {other} addresses, or reach the target over {own}"),
            );
        }
    }
}

/// `http_version`: HTTP/2 is for http(s) targets; with a pool the engine multiplexes HTTP/2
/// connections, so it must know before connecting that every connection will speak it.
fn check_http_version(problems: &mut Problems, target: &Target) {
    check_http2_settings(problems, target);
    let wanted = match target.http_version {
        HttpVersion::Http1 => return,
        HttpVersion::Http2 => "2",
        HttpVersion::Auto => "auto",
    };
    if crate::is_postgres_url(&target.base_url) {
        problems.push_hint(
            "target.http_version".into(),
            format!("'{wanted}' is for http:// and https:// targets"),
            "leave http_version out for a postgresql:// target",
        );
    } else if target.http_version == HttpVersion::Auto && target.connections.pool_size().is_some() {
        problems.push_hint(
            "target.http_version".into(),
            "'auto' cannot be combined with connections: {pool: N} (a pool multiplexes HTTP/2 connections and must \
             know the protocol before connecting)",
            "write http_version: '2' (the server speaks HTTP/2) or '1.1'",
        );
    }
}

/// `http2`: RFC 9113's bounds on the windows, at least one stream, and only where HTTP/2 may
/// be spoken.
fn check_http2_settings(problems: &mut Problems, target: &Target) {
    let Some(settings) = &target.http2 else { return };
    if target.http_version == HttpVersion::Http1 {
        problems.push_hint(
            "target.http2".into(),
            "HTTP/2's settings need http_version '2' or 'auto' (the target speaks HTTP/1.1)",
            "add http_version: '2' or auto, or leave http2 out",
        );
        return;
    }
    let bounded = [
        ("stream_window_bytes", settings.stream_window_bytes, 1, MAX_H2_WINDOW_BYTES),
        (
            "connection_window_bytes",
            settings.connection_window_bytes,
            MIN_H2_CONNECTION_WINDOW_BYTES,
            MAX_H2_WINDOW_BYTES,
        ),
        ("max_concurrent_streams", settings.max_concurrent_streams.unwrap_or(1), 1, MAX_H2_CONCURRENT_STREAMS),
    ];
    for (field, value, low, high) in bounded {
        if !(low..=high).contains(&value) {
            problems.push(format!("target.http2.{field}"), format!("must be from {low} to {high} (got {value})"));
        }
    }
}

/// The host of a target URL when it is an IP literal (`http://[::1]:8080` gives `::1`).
fn url_ip(url: &str) -> Option<IpAddr> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let host_and_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = match host_and_port.strip_prefix('[') {
        Some(bracketed) => bracketed.split_once(']')?.0,
        None => host_and_port.rsplit_once(':').map_or(host_and_port, |(host, _)| host),
    };
    host.parse().ok()
}

#[cfg(test)]
mod tests {
    use crate::{decode, Connections, HttpVersion};

    fn plan_with_target(target: &str) -> String {
        format!(
            r#"{{"version": 1, "target": {target},
                "scenarios": [{{"name": "s", "steps": [{{"name": "x", "method": "GET", "path": "/"}}],
                "workload": {{"type": "closed", "stages": [{{"duration_s": 1, "vus": 1}}]}}}}]}}"#
        )
    }

    fn problems(target: &str) -> Vec<String> {
        decode(&plan_with_target(target)).unwrap().validate().into_iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn http_version_reads_three_values_and_auto_refuses_a_pool() {
        let default = decode(&plan_with_target(r#"{"base_url": "http://127.0.0.1:1"}"#)).unwrap();
        assert_eq!(default.target.http_version, HttpVersion::Http1);
        for (text, version) in [("1.1", HttpVersion::Http1), ("2", HttpVersion::Http2), ("auto", HttpVersion::Auto)] {
            let plan = decode(&plan_with_target(&format!(r#"{{"base_url": "https://h", "http_version": "{text}"}}"#)))
                .unwrap();
            assert_eq!(plan.target.http_version, version);
            assert_eq!(serde_json::to_value(version).unwrap(), serde_json::json!(text));
        }
        let unquoted = decode(&plan_with_target(r#"{"base_url": "http://h", "http_version": 2}"#)).unwrap();
        assert_eq!(unquoted.target.http_version, HttpVersion::Http2);
        let wrong = decode(&plan_with_target(r#"{"base_url": "http://h", "http_version": "3"}"#)).unwrap_err();
        assert_eq!(wrong.path, "target.http_version");
        let pooled = problems(r#"{"base_url": "https://h", "http_version": "auto", "connections": {"pool": 2}}"#);
        assert_eq!(pooled.len(), 1);
        assert!(pooled[0].starts_with("target.http_version: 'auto' cannot be combined with connections"), "{pooled:?}");
        assert!(problems(r#"{"base_url": "http://h", "http_version": "2", "connections": {"pool": 2}}"#).is_empty());
    }

    #[test]
    fn http2_settings_are_bounded_and_need_http2() {
        let plan = decode(&plan_with_target(
            r#"{"base_url": "http://h", "http_version": "2", "http2": {"max_concurrent_streams": 4}}"#,
        ))
        .unwrap();
        let settings = plan.target.http2.unwrap();
        assert_eq!(
            (settings.stream_window_bytes, settings.connection_window_bytes, settings.max_concurrent_streams),
            (1 << 20, 16 << 20, Some(4))
        );
        assert!(plan.validate().is_empty());
        assert_eq!(
            problems(
                r#"{"base_url": "http://h", "http_version": "2", "http2": {"stream_window_bytes": 0, "connection_window_bytes": 65534, "max_concurrent_streams": 0}}"#
            ),
            vec![
                "target.http2.stream_window_bytes: must be from 1 to 2147483647 (got 0)",
                "target.http2.connection_window_bytes: must be from 65535 to 2147483647 (got 65534)",
                "target.http2.max_concurrent_streams: must be from 1 to 2147483647 (got 0)",
            ]
        );
        assert_eq!(
            problems(r#"{"base_url": "http://h", "http2": {"stream_window_bytes": 2147483648}}"#),
            vec!["target.http2: HTTP/2's settings need http_version '2' or 'auto' (the target speaks HTTP/1.1)"]
        );
        let wrong =
            decode(&plan_with_target(r#"{"base_url": "http://h", "http_version": "2", "http2": {"window": 1}}"#))
                .unwrap_err();
        assert!(wrong.path.starts_with("target.http2"), "{}", wrong.path);
    }

    #[test]
    fn connections_read_per_vu_or_a_pool() {
        let default = decode(&plan_with_target(r#"{"base_url": "http://127.0.0.1:1"}"#)).unwrap();
        assert_eq!(default.target.connections, Connections::PerVu);
        let per_vu =
            decode(&plan_with_target(r#"{"base_url": "http://127.0.0.1:1", "connections": "per_vu"}"#)).unwrap();
        assert_eq!(per_vu.target.connections, Connections::PerVu);
        let pool =
            decode(&plan_with_target(r#"{"base_url": "http://127.0.0.1:1", "connections": {"pool": 20}}"#)).unwrap();
        assert_eq!(pool.target.connections, Connections::Pool(20));
        assert_eq!(serde_json::to_value(pool.target.connections).unwrap(), serde_json::json!({"pool": 20}));
        assert_eq!(serde_json::to_value(Connections::PerVu).unwrap(), serde_json::json!("per_vu"));
        let wrong = decode(&plan_with_target(r#"{"base_url": "http://h", "connections": "shared"}"#)).unwrap_err();
        assert_eq!(wrong.path, "target.connections");
        assert_eq!(
            problems(r#"{"base_url": "http://h", "connections": {"pool": 0}}"#),
            vec!["target.connections.pool: must be at least 1 (got 0)"]
        );
    }

    #[test]
    fn source_addresses_are_ip_literals_of_the_target_family() {
        assert!(problems(r#"{"base_url": "http://127.0.0.1:8080", "source_addresses": ["127.0.0.2", "127.0.0.3"]}"#)
            .is_empty());
        assert_eq!(
            problems(
                r#"{"base_url": "http://127.0.0.1:8080", "source_addresses": ["127.0.0.2", "localhost", "127.0.0.2", "::1"]}"#
            ),
            vec![
                "target.source_addresses[1]: 'localhost' is not an IP address",
                "target.source_addresses[2]: '127.0.0.2' is listed twice",
                "target.source_addresses[3]: '::1' is an IPv6 address but the target is reached over IPv4",
            ]
        );
        // A target given by name may resolve to either family: only the literal is checked.
        assert!(problems(r#"{"base_url": "http://localhost:8080", "source_addresses": ["::1"]}"#).is_empty());
    }
}
