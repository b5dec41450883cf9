//! The endpoints: from a request path to what the target should do, and the responses it gives.
//!
//! Parsing is kept apart from timing (`service.rs`) so that every path rule is unit-tested
//! without sockets or clocks.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

/// Longest delay or stall accepted, in milliseconds (one hour). Anything longer is surely a
/// typo, and a bound keeps duration arithmetic far from overflow.
pub(crate) const MAX_DURATION_MS: f64 = 3_600_000.0;

/// Largest `/bytes/{n}` body: 16 MiB.
pub(crate) const MAX_BYTES: usize = 16 * 1024 * 1024;

/// The body of every `/bytes/{n}` response is a slice of this, so a large body costs no
/// allocation or copy. Zeros live in `.bss`, adding nothing to the binary.
static ZEROS: [u8; MAX_BYTES] = [0; MAX_BYTES];

/// What a well-formed request asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Route {
    /// `/`
    Root,
    /// `/delay/{ms}`
    Delay(Duration),
    /// `/status/{code}`
    Status(StatusCode),
    /// `/bytes/{n}`
    Bytes(usize),
    /// `/stall/{ms}`
    Stall(Duration),
}

/// Why a request gets no endpoint.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Rejection {
    /// 404: no such endpoint.
    NotFound,
    /// 400: the endpoint exists but its argument is malformed; the reason is one line.
    BadRequest(String),
}

/// Maps a request path (without its query) to a route. The method is ignored on purpose: a
/// load test's POST to `/delay/10` should behave like its GET.
pub(crate) fn route(path: &str) -> Result<Route, Rejection> {
    if path == "/" {
        return Ok(Route::Root);
    }
    let (endpoint, argument) =
        path.strip_prefix('/').and_then(|rest| rest.split_once('/')).ok_or(Rejection::NotFound)?;
    match endpoint {
        "delay" => parse_milliseconds(argument).map(Route::Delay),
        "status" => parse_status(argument).map(Route::Status),
        "bytes" => parse_byte_count(argument).map(Route::Bytes),
        "stall" => parse_milliseconds(argument).map(Route::Stall),
        _ => Err(Rejection::NotFound),
    }
}

/// Whether a path is stall control, which is answered at once: it must neither wait for the
/// stall it is setting nor take a worker of the capacity model.
pub(crate) fn is_stall_control(path: &str) -> bool {
    path.starts_with("/stall/")
}

pub(crate) fn parse_milliseconds(text: &str) -> Result<Duration, Rejection> {
    let bad = || {
        Rejection::BadRequest(format!(
            "`{text}` is not a number of milliseconds (expected digits with an optional \
             decimal part, such as 50 or 2.5)"
        ))
    };
    // f64::from_str alone would also take "inf", "NaN", "-1", "+1" and "1e3".
    let digits = text.bytes().filter(u8::is_ascii_digit).count();
    let dots = text.bytes().filter(|byte| *byte == b'.').count();
    if digits == 0 || dots > 1 || digits + dots != text.len() {
        return Err(bad());
    }
    let milliseconds: f64 = text.parse().map_err(|_| bad())?;
    if milliseconds > MAX_DURATION_MS {
        return Err(Rejection::BadRequest(format!("{text} ms is too long (at most {MAX_DURATION_MS} ms)")));
    }
    Ok(Duration::from_secs_f64(milliseconds / 1000.0))
}

fn parse_status(text: &str) -> Result<StatusCode, Rejection> {
    let code = parse_digits(text)
        .ok_or_else(|| Rejection::BadRequest(format!("`{text}` is not a status code (expected 200 to 599)")))?;
    match code {
        100..=199 => Err(Rejection::BadRequest(format!(
            "status {code} is informational (1xx) and cannot end a response; use 200 to 599"
        ))),
        200..=599 => u16::try_from(code)
            .ok()
            .and_then(|code| StatusCode::from_u16(code).ok())
            .ok_or_else(|| Rejection::BadRequest(format!("status {code} is not valid"))),
        _ => Err(Rejection::BadRequest(format!("status {text} is out of range (expected 200 to 599)"))),
    }
}

fn parse_byte_count(text: &str) -> Result<usize, Rejection> {
    let count = parse_digits(text)
        .ok_or_else(|| Rejection::BadRequest(format!("`{text}` is not a number of bytes (expected digits)")))?;
    match usize::try_from(count) {
        Ok(count) if count <= MAX_BYTES => Ok(count),
        _ => Err(Rejection::BadRequest(format!("{text} bytes is too large (at most {MAX_BYTES})"))),
    }
}

/// Parses plain decimal digits; `None` for anything else, including an empty string and signs.
/// A number too large for `u64` saturates so that callers report "too large", not
/// "not a number".
fn parse_digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    Some(text.parse().unwrap_or(u64::MAX))
}

/// The response for a route, once any waiting is over.
pub(crate) fn respond(route: Route) -> Response<Full<Bytes>> {
    match route {
        Route::Root | Route::Delay(_) => text(StatusCode::OK, Bytes::from_static(b"ok\n")),
        Route::Status(status) => text(status, Bytes::from(format!("status {}\n", status.as_u16()))),
        Route::Bytes(count) => {
            let mut response = Response::new(Full::new(Bytes::from_static(&ZEROS[..count])));
            response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
            response
        }
        Route::Stall(duration) => {
            text(StatusCode::OK, Bytes::from(format!("stalled {} ms\n", duration.as_secs_f64() * 1000.0)))
        }
    }
}

/// The response for a request that matched no endpoint.
pub(crate) fn reject(rejection: Rejection) -> Response<Full<Bytes>> {
    match rejection {
        Rejection::NotFound => text(
            StatusCode::NOT_FOUND,
            Bytes::from_static(
                b"not found: endpoints are /, /delay/{ms}, /status/{code}, /bytes/{n}, /stall/{ms}, /game/...\n",
            ),
        ),
        Rejection::BadRequest(reason) => text(StatusCode::BAD_REQUEST, Bytes::from(reason + "\n")),
    }
}

fn text(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad(path: &str) -> bool {
        matches!(route(path), Err(Rejection::BadRequest(_)))
    }

    #[test]
    fn known_paths_route() {
        assert_eq!(route("/"), Ok(Route::Root));
        assert_eq!(route("/delay/50"), Ok(Route::Delay(Duration::from_millis(50))));
        assert_eq!(route("/delay/2.5"), Ok(Route::Delay(Duration::from_micros(2500))));
        assert_eq!(route("/delay/0"), Ok(Route::Delay(Duration::ZERO)));
        assert_eq!(route("/status/503"), Ok(Route::Status(StatusCode::SERVICE_UNAVAILABLE)));
        assert_eq!(route("/status/200"), Ok(Route::Status(StatusCode::OK)));
        assert_eq!(route("/bytes/0"), Ok(Route::Bytes(0)));
        assert_eq!(route("/bytes/16777216"), Ok(Route::Bytes(MAX_BYTES)));
        assert_eq!(route("/stall/300"), Ok(Route::Stall(Duration::from_millis(300))));
    }

    #[test]
    fn unknown_paths_are_not_found() {
        for path in ["", "/nope", "/delay", "/status", "/bytes", "/stall", "//", "/ok/1"] {
            assert_eq!(route(path), Err(Rejection::NotFound), "{path}");
        }
    }

    #[test]
    fn malformed_numbers_are_bad_requests() {
        for path in [
            "/delay/",
            "/delay/abc",
            "/delay/-1",
            "/delay/+1",
            "/delay/1e3",
            "/delay/inf",
            "/delay/NaN",
            "/delay/1.2.3",
            "/delay/.",
            "/delay/50/",
            "/delay/3600001",
            "/status/",
            "/status/99",
            "/status/100",
            "/status/199",
            "/status/600",
            "/status/99999999",
            "/status/2x0",
            "/bytes/",
            "/bytes/-1",
            "/bytes/16777217",
            "/bytes/99999999999999999999999",
            "/stall/x",
        ] {
            assert!(bad(path), "{path}");
        }
    }

    #[test]
    fn reasons_are_one_line() {
        for path in ["/delay/x", "/status/150", "/bytes/99999999999"] {
            let Err(Rejection::BadRequest(reason)) = route(path) else { panic!("{path}") };
            assert!(!reason.contains('\n'), "{reason}");
        }
    }

    #[test]
    fn decimal_forms_are_accepted() {
        assert_eq!(route("/delay/.5"), Ok(Route::Delay(Duration::from_micros(500))));
        assert_eq!(route("/delay/5."), Ok(Route::Delay(Duration::from_millis(5))));
    }
}
