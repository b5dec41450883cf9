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
    /// The response was not valid HTTP/1.1.
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
    /// A `ping` step's reply did not come within its timeout (a message transport).
    Lost,
}

impl ErrorKind {
    /// Kinds other than `Status`, in their counter order.
    pub const FIXED: [ErrorKind; 23] = [
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
            ErrorKind::NoRoute => "no_route".into(),
            ErrorKind::Lost => "lost".into(),
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
    use super::ErrorKind;

    #[test]
    fn no_route_to_host_is_kept_apart_from_other_connect_failures() {
        // EHOSTUNREACH (113) and ENETUNREACH (101) on Linux: the IoT report charts 113 alone.
        assert_eq!(ErrorKind::from_io(&std::io::Error::from_raw_os_error(113)), ErrorKind::NoRoute);
        assert_eq!(ErrorKind::from_io(&std::io::Error::from_raw_os_error(101)), ErrorKind::NoRoute);
        assert_eq!(ErrorKind::from_io(&std::io::Error::from_raw_os_error(99)), ErrorKind::Connect, "EADDRNOTAVAIL");
        assert_eq!(ErrorKind::from_io(&std::io::Error::from_raw_os_error(111)), ErrorKind::Refused);
        assert_eq!(ErrorKind::NoRoute.label(), "no_route");
        assert_eq!(ErrorKind::Lost.label(), "lost");
    }
}
