//! The kinds a failed request is counted under.

/// Why a request failed. A failed request is data: it is counted under its kind, never raised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A response with status 400 or above.
    Status(u16),
    /// The target refused the connection (nothing listening).
    Refused,
    /// The connection was reset or closed before the response was complete.
    Reset,
    /// Connect or request took longer than the plan's timeout.
    Timeout,
    /// The TLS handshake failed (certificate, protocol).
    Tls,
    /// The target's host name did not resolve.
    Dns,
    /// Any other failure to connect (an address not available, a source address not bound).
    Connect,
    /// No route to the target's host or network (EHOSTUNREACH 113, ENETUNREACH 101): kept apart
    /// from other connect failures, as a routing fault rather than the target's.
    NoRoute,
    /// The answer did not follow its protocol: not valid HTTP/1.1, a broken WebSocket frame, a
    /// tcp:// stream off the plan's framing (the error's detail names which).
    Protocol,
    /// The response's head (status line and headers) was larger than the plan's
    /// `target.max_response_header_bytes`.
    HeadersTooLarge,
    /// Any other IO error.
    Io,
    /// A check of the plan failed on the response.
    CheckFailed,
    /// An extractor found nothing and had no default.
    ExtractFailed,
    /// A step's checks or extractors needed the body, and it was larger than the plan's
    /// `target.max_kept_body_bytes`: the body was read and counted, not judged.
    BodyTooLarge,
    /// A unique feeder had no row left for the VU.
    FeederExhausted,
    /// A template could not be rendered (a variable left unset by a failed extraction).
    TemplateFailed,
    /// A group pass in which some step failed.
    StepFailed,
    /// Still in flight when the grace period ended: the request was cut without an answer.
    Cut,
    /// PostgreSQL: SQLSTATE 40001, a serializable transaction could not be serialized.
    SqlSerializationFailure,
    /// PostgreSQL: SQLSTATE 40P01, the statement was chosen as a deadlock's victim.
    SqlDeadlock,
    /// PostgreSQL: SQLSTATE 23505, a unique constraint was violated.
    SqlUniqueViolation,
    /// PostgreSQL: the connection failed or was closed (class 08, 57P01-57P03 shutdown or
    /// start-up, a terminated backend, a broken socket).
    SqlConnectionFailure,
    /// PostgreSQL: any other error the server reported.
    SqlOther,
    /// PostgreSQL: the server refused the login (SQLSTATE class 28: a wrong password, no
    /// `pg_hba.conf` entry; 3D000: no such database), or asked for a password the plan does not
    /// give. No session was opened: a failed connect, as `refused` is.
    SqlLoginFailed,
    /// A `ping` step's reply did not come within its timeout (a message transport).
    Lost,
    /// HTTP/2: the server reset the request's stream (RST_STREAM), with its error code: 0 to 13
    /// as RFC 9113 numbers them, [`H2_RESET_OTHER`] for any other code. Build it with
    /// [`ErrorKind::h2_reset`].
    H2Reset(u8),
    /// HTTP/2: the connection ended with a GOAWAY before the request's response ended. (A
    /// server that closes its socket right after its GOAWAY may show as `Reset` instead.)
    H2GoAway,
    /// The plan insists on HTTP/2 (`target.http_version: "2"`) and the TLS server did not
    /// choose h2 in ALPN.
    H2Refused,
    /// WebSocket: the server closed the connection with a close frame (its code in the error
    /// detail) while the VU still expected messages.
    WsClosed,
}

/// HTTP/2 error codes by number (RFC 9113 section 7), as [`ErrorKind::H2Reset`] labels them.
const H2_CODES: [&str; 14] = [
    "no_error",
    "protocol_error",
    "internal_error",
    "flow_control_error",
    "settings_timeout",
    "stream_closed",
    "frame_size_error",
    "refused_stream",
    "cancel",
    "compression_error",
    "connect_error",
    "enhance_your_calm",
    "inadequate_security",
    "http_1_1_required",
];

/// [`ErrorKind::H2Reset`] of a code outside RFC 9113's list.
pub const H2_RESET_OTHER: u8 = 14;

impl ErrorKind {
    /// Kinds other than `Status`, in their counter order.
    pub const FIXED: [ErrorKind; 42] = [
        ErrorKind::Refused,
        ErrorKind::Reset,
        ErrorKind::Timeout,
        ErrorKind::Tls,
        ErrorKind::Dns,
        ErrorKind::Connect,
        ErrorKind::Protocol,
        ErrorKind::HeadersTooLarge,
        ErrorKind::Io,
        ErrorKind::CheckFailed,
        ErrorKind::ExtractFailed,
        ErrorKind::BodyTooLarge,
        ErrorKind::FeederExhausted,
        ErrorKind::TemplateFailed,
        ErrorKind::StepFailed,
        ErrorKind::Cut,
        ErrorKind::SqlSerializationFailure,
        ErrorKind::SqlDeadlock,
        ErrorKind::SqlUniqueViolation,
        ErrorKind::SqlConnectionFailure,
        ErrorKind::SqlOther,
        ErrorKind::NoRoute,
        ErrorKind::Lost,
        ErrorKind::H2Reset(0),
        ErrorKind::H2Reset(1),
        ErrorKind::H2Reset(2),
        ErrorKind::H2Reset(3),
        ErrorKind::H2Reset(4),
        ErrorKind::H2Reset(5),
        ErrorKind::H2Reset(6),
        ErrorKind::H2Reset(7),
        ErrorKind::H2Reset(8),
        ErrorKind::H2Reset(9),
        ErrorKind::H2Reset(10),
        ErrorKind::H2Reset(11),
        ErrorKind::H2Reset(12),
        ErrorKind::H2Reset(13),
        ErrorKind::H2Reset(H2_RESET_OTHER),
        ErrorKind::H2GoAway,
        ErrorKind::H2Refused,
        ErrorKind::WsClosed,
        ErrorKind::SqlLoginFailed,
    ];
    pub const FIXED_COUNT: usize = Self::FIXED.len();

    /// The label used in snapshots, the store and reports.
    pub fn label(&self) -> String {
        match self {
            ErrorKind::Status(code) => format!("status_{code}"),
            ErrorKind::Refused => "refused".into(),
            ErrorKind::Reset => "reset".into(),
            ErrorKind::Timeout => "timeout".into(),
            ErrorKind::Tls => "tls".into(),
            ErrorKind::Dns => "dns".into(),
            ErrorKind::Connect => "connect".into(),
            ErrorKind::Protocol => "protocol".into(),
            ErrorKind::HeadersTooLarge => "headers_too_large".into(),
            ErrorKind::Io => "io".into(),
            ErrorKind::CheckFailed => "check_failed".into(),
            ErrorKind::ExtractFailed => "extract_failed".into(),
            ErrorKind::BodyTooLarge => "body_too_large".into(),
            ErrorKind::FeederExhausted => "feeder_exhausted".into(),
            ErrorKind::TemplateFailed => "template_failed".into(),
            ErrorKind::StepFailed => "step_failed".into(),
            ErrorKind::Cut => "cut".into(),
            ErrorKind::SqlSerializationFailure => "sql_serialization_failure".into(),
            ErrorKind::SqlDeadlock => "sql_deadlock".into(),
            ErrorKind::SqlUniqueViolation => "sql_unique_violation".into(),
            ErrorKind::SqlConnectionFailure => "sql_connection_failure".into(),
            ErrorKind::SqlOther => "sql_other".into(),
            ErrorKind::SqlLoginFailed => "sql_login_failed".into(),
            ErrorKind::NoRoute => "no_route".into(),
            ErrorKind::Lost => "lost".into(),
            ErrorKind::H2Reset(code) => match H2_CODES.get(usize::from(*code)) {
                Some(name) => format!("h2_reset_{name}"),
                None => "h2_reset_other".into(),
            },
            ErrorKind::H2GoAway => "h2_goaway".into(),
            ErrorKind::H2Refused => "h2_refused".into(),
            ErrorKind::WsClosed => "ws_closed".into(),
        }
    }

    /// The kind of an HTTP/2 stream reset with error code `code`.
    pub fn h2_reset(code: u32) -> ErrorKind {
        match u8::try_from(code) {
            Ok(code) if usize::from(code) < H2_CODES.len() => ErrorKind::H2Reset(code),
            _ => ErrorKind::H2Reset(H2_RESET_OTHER),
        }
    }

    pub(crate) fn fixed_index(&self) -> Option<usize> {
        Self::FIXED.iter().position(|kind| kind == self)
    }

    /// Classifies an IO error from connecting or exchanging a request.
    pub fn from_io(error: &std::io::Error) -> ErrorKind {
        use std::io::ErrorKind as Io;
        match error.kind() {
            Io::ConnectionRefused => ErrorKind::Refused,
            Io::ConnectionReset | Io::ConnectionAborted | Io::BrokenPipe | Io::UnexpectedEof => ErrorKind::Reset,
            Io::TimedOut => ErrorKind::Timeout,
            Io::HostUnreachable | Io::NetworkUnreachable => ErrorKind::NoRoute,
            Io::AddrNotAvailable | Io::NetworkDown => ErrorKind::Connect,
            Io::InvalidData => ErrorKind::Protocol,
            _ => ErrorKind::Io,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_route_to_host_is_kept_apart_from_other_connect_failures() {
        // EHOSTUNREACH (113) and ENETUNREACH (101) on Linux: the IoT report charts 113 alone.
        assert_eq!(ErrorKind::from_io(&std::io::Error::from_raw_os_error(113)), ErrorKind::NoRoute);
        assert_eq!(ErrorKind::from_io(&std::io::Error::from_raw_os_error(101)), ErrorKind::NoRoute);
        assert_eq!(ErrorKind::from_io(&std::io::Error::from_raw_os_error(99)), ErrorKind::Connect, "EADDRNOTAVAIL");
        assert_eq!(ErrorKind::from_io(&std::io::Error::from_raw_os_error(111)), ErrorKind::Refused);
        assert_eq!(ErrorKind::NoRoute.label(), "no_route");
        assert_eq!(ErrorKind::Lost.label(), "lost");
        assert_eq!(ErrorKind::WsClosed.label(), "ws_closed");
    }

    #[test]
    fn h2_resets_are_labelled_by_their_code() {
        assert_eq!(ErrorKind::h2_reset(7).label(), "h2_reset_refused_stream");
        assert_eq!(ErrorKind::h2_reset(0xd).label(), "h2_reset_http_1_1_required");
        assert_eq!(ErrorKind::h2_reset(0xff).label(), "h2_reset_other");
        assert_eq!(ErrorKind::h2_reset(u32::MAX), ErrorKind::H2Reset(H2_RESET_OTHER));
        // Every fixed kind has its own counter and its own label.
        let labels: std::collections::BTreeSet<String> = ErrorKind::FIXED.iter().map(ErrorKind::label).collect();
        assert_eq!(labels.len(), ErrorKind::FIXED_COUNT);
        assert!(ErrorKind::FIXED.iter().all(|kind| kind.fixed_index().is_some()));
    }
}
