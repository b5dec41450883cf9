//! Each endpoint's status, body and framing, and keep-alive.

mod common;

use common::{start_default, Client};

#[test]
fn root_is_ok_text() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    let response = client.get("/");
    assert_eq!(response.status, 200);
    assert_eq!(response.body, b"ok\n");
    assert_eq!(response.content_length(), Some(3));
    assert_eq!(response.header("content-type"), Some("text/plain"));
}

#[test]
fn any_method_is_served_and_bodies_are_read() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    for method in ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
        let body = vec![b'x'; 100_000];
        let response = client.request(method, "/", &body).expect("request");
        assert_eq!(response.status, 200, "{method}");
        assert_eq!(response.body, b"ok\n", "{method}");
    }
    // The bodies were consumed, so the connection is still in step.
    assert_eq!(client.get("/status/201").status, 201);
}

#[test]
fn head_has_content_length_but_no_body() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    let response = client.request("HEAD", "/bytes/1234", b"").expect("request");
    assert_eq!(response.status, 200);
    assert_eq!(response.content_length(), Some(1234));
    assert_eq!(client.get("/").status, 200);
}

#[test]
fn delay_accepts_integers_and_decimals() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    for path in ["/delay/0", "/delay/1", "/delay/2.5", "/delay/.5"] {
        let response = client.get(path);
        assert_eq!(response.status, 200, "{path}");
        assert_eq!(response.body, b"ok\n", "{path}");
        assert_eq!(response.content_length(), Some(3), "{path}");
    }
}

#[test]
fn status_returns_the_code_asked_for() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    for code in [200u16, 201, 302, 400, 404, 418, 500, 503, 599] {
        let response = client.get(&format!("/status/{code}"));
        assert_eq!(response.status, code);
        assert_eq!(response.text(), format!("status {code}\n"));
        assert_eq!(response.content_length(), Some(response.body.len()));
    }
    // HTTP forbids a body for these; the connection must stay usable after them.
    for code in [204u16, 304] {
        let response = client.get(&format!("/status/{code}"));
        assert_eq!(response.status, code);
        assert_eq!(client.get("/").status, 200, "after {code}");
    }
}

#[test]
fn status_rejects_informational_and_out_of_range_codes() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    for code in ["100", "101", "199", "99", "600", "1000", "abc", "-200"] {
        let response = client.get(&format!("/status/{code}"));
        assert_eq!(response.status, 400, "{code}");
        assert_one_line_reason(&response.text());
    }
}

#[test]
fn bytes_returns_exactly_n_bytes() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    for count in [0usize, 1, 1000, 65_537, 1 << 20, 16 * 1024 * 1024] {
        let response = client.get(&format!("/bytes/{count}"));
        assert_eq!(response.status, 200, "{count}");
        assert_eq!(response.content_length(), Some(count));
        assert_eq!(response.body.len(), count);
        assert_eq!(response.header("content-type"), Some("application/octet-stream"));
    }
}

#[test]
fn bytes_beyond_16_mib_is_a_bad_request() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    for count in ["16777217", "99999999999999999999999", "1k", ""] {
        let response = client.get(&format!("/bytes/{count}"));
        assert_eq!(response.status, 400, "{count:?}");
        assert_one_line_reason(&response.text());
    }
}

#[test]
fn malformed_numbers_are_bad_requests() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    for path in ["/delay/abc", "/delay/-5", "/delay/1e3", "/delay/1.2.3", "/delay/", "/stall/x"] {
        let response = client.get(path);
        assert_eq!(response.status, 400, "{path}");
        assert_one_line_reason(&response.text());
    }
}

#[test]
fn unknown_paths_are_not_found() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    for path in ["/nope", "/delay", "/status", "/bytes", "/stall", "/index.html", "/ok/1"] {
        let response = client.get(path);
        assert_eq!(response.status, 404, "{path}");
        assert_eq!(response.content_length(), Some(response.body.len()));
    }
}

#[test]
fn query_strings_are_ignored() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    assert_eq!(client.get("/bytes/10?cache=no").body.len(), 10);
}

#[test]
fn keep_alive_serves_100_requests_on_one_connection() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    let paths = ["/", "/status/500", "/bytes/100", "/delay/0", "/nope"];
    for index in 0..100 {
        let path = paths[index % paths.len()];
        let response = client
            .request("GET", path, b"")
            .unwrap_or_else(|error| panic!("request {index} ({path}) failed on the kept-alive connection: {error}"));
        assert_ne!(response.header("connection"), Some("close"), "request {index}");
    }
}

fn assert_one_line_reason(text: &str) {
    assert!(text.ends_with('\n'), "{text:?}");
    assert_eq!(text.matches('\n').count(), 1, "{text:?}");
    assert!(text.len() > 10, "{text:?}");
}
