//! What a caller may ask of the target, and how starting it can fail.

use std::io;

use crate::shared::SharedCosts;

/// How to start a target. `TargetConfig::default()` listens on `127.0.0.1` at a free port, with
/// no capacity limit, on one worker thread.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetConfig {
    /// Host name or IP address to listen on, such as `"127.0.0.1"` or `"::1"`. Names are resolved
    /// and the first address that binds is used. Default `"127.0.0.1"`.
    pub host: String,
    /// TCP port to listen on; `0` lets the system pick a free one, which
    /// [`TargetHandle::port`](crate::TargetHandle::port) then reports. Default `0`.
    pub port: u16,
    /// A service capacity to emulate, or `None` (the default) to serve every request as soon as
    /// its endpoint allows.
    pub capacity: Option<Capacity>,
    /// Worker threads of the target's own tokio runtime; at least 1. Default `1`, which leaves the
    /// cores to the load generator that the target usually shares a machine with.
    pub threads: usize,
    /// Serve HTTPS with this certificate and key (ALPN offers h2 and http/1.1) instead of
    /// plain HTTP; `None` (the default): HTTP/1.1 and h2c in clear text.
    pub tls: Option<TargetTls>,
    /// Join the resource every target of this process shares, at these costs (see the `shared`
    /// module: with the capacity model they make a scalability study's answer known); `None`
    /// (the default): the target shares nothing.
    pub shared: Option<SharedCosts>,
}

/// A certificate chain and its private key, both PEM: what the target serves HTTPS with
/// ([`crate::self_signed`] makes one).
#[derive(Clone, PartialEq)]
pub struct TargetTls {
    pub certificate_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for TargetTls {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of logs.
        formatter.debug_struct("TargetTls").field("certificate_pem", &self.certificate_pem).finish_non_exhaustive()
    }
}

impl Default for TargetConfig {
    fn default() -> Self {
        TargetConfig { host: "127.0.0.1".to_string(), port: 0, capacity: None, threads: 1, tls: None, shared: None }
    }
}

/// A server with `workers` parallel workers, each taking `service_ms` per request (on average,
/// with exponential service times): its maximum throughput is exactly `workers * 1000 /
/// service_ms` requests per second, whatever the timer granularity, because completion instants
/// are computed rather than measured (see the `capacity` module).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capacity {
    /// How many requests are in service at once; at least 1.
    pub workers: usize,
    /// Service time of one request in milliseconds (the mean, for exponential service times);
    /// finite and greater than 0.
    pub service_ms: f64,
    /// Every request takes `service_ms` (an M/D/c queue: latency flat up to capacity, then a
    /// cliff), or a time drawn from an exponential distribution of that mean (M/M/c: latency
    /// rises smoothly towards capacity, as in most real services).
    pub service_times: ServiceTimes,
}

/// How long each request's service takes (see [`Capacity::service_times`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServiceTimes {
    #[default]
    Fixed,
    Exponential,
}

/// Why a target could not start.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The listening socket could not be opened.
    #[error("cannot listen on {address}: {reason}")]
    Bind {
        /// `host:port` as asked for.
        address: String,
        /// What went wrong, in words a user can act on.
        reason: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A field of [`TargetConfig`] is out of range.
    #[error("invalid target configuration: {0}")]
    InvalidConfig(String),
    /// The target's runtime or thread could not be created.
    #[error("cannot start the target's runtime: {0}")]
    Runtime(#[source] io::Error),
}

impl TargetConfig {
    pub(crate) fn check(&self) -> Result<(), TargetError> {
        if self.threads == 0 {
            return Err(TargetError::InvalidConfig("threads must be at least 1".to_string()));
        }
        if let Some(capacity) = self.capacity {
            if capacity.workers == 0 {
                return Err(TargetError::InvalidConfig("capacity.workers must be at least 1".to_string()));
            }
            // The upper bound keeps Duration::from_secs_f64 far from overflow.
            if !(capacity.service_ms.is_finite()
                && capacity.service_ms > 0.0
                && capacity.service_ms <= crate::routes::MAX_DURATION_MS)
            {
                return Err(TargetError::InvalidConfig(format!(
                    "capacity.service_ms must be greater than 0 and at most {} (got {})",
                    crate::routes::MAX_DURATION_MS,
                    capacity.service_ms
                )));
            }
        }
        if let Some(shared) = self.shared {
            for (name, value) in [("serial_ms", shared.serial_ms), ("crosstalk_ms", shared.crosstalk_ms)] {
                if !(value.is_finite() && (0.0..=MAX_SHARED_MS).contains(&value)) {
                    return Err(TargetError::InvalidConfig(format!(
                        "shared.{name} must be at least 0 and at most {MAX_SHARED_MS} (got {value})"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The most a shared cost may be, ms: a second per request already makes a target serve a
/// handful of requests per second.
pub const MAX_SHARED_MS: f64 = 1000.0;

/// Turns an `io::Error` from `bind`/`listen` into advice rather than an errno.
pub(crate) fn bind_reason(error: &io::Error, port: u16) -> String {
    match error.kind() {
        io::ErrorKind::AddrInUse => {
            "address in use (another process listens there; pick another port or 0 for any free one)".to_string()
        }
        io::ErrorKind::AddrNotAvailable => {
            "address not available (no interface on this host has that address)".to_string()
        }
        io::ErrorKind::PermissionDenied if port != 0 && port < 1024 => {
            "permission denied (ports below 1024 need privileges; use a port >= 1024)".to_string()
        }
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_loopback_any_port_unlimited() {
        let config = TargetConfig::default();
        assert_eq!(config.host, "127.0.0.1");
        assert_eq!(config.port, 0);
        assert_eq!(config.capacity, None);
        assert_eq!(config.threads, 1);
        assert!(config.check().is_ok());
    }

    #[test]
    fn out_of_range_fields_are_rejected() {
        let zero_threads = TargetConfig { threads: 0, ..TargetConfig::default() };
        assert!(zero_threads.check().unwrap_err().to_string().contains("threads"));
        for (workers, service_ms) in [(0, 10.0), (1, 0.0), (1, -1.0), (1, f64::NAN), (1, 1e300)] {
            let config = TargetConfig {
                capacity: Some(Capacity { workers, service_ms, service_times: ServiceTimes::Fixed }),
                ..TargetConfig::default()
            };
            assert!(config.check().is_err(), "{workers} {service_ms}");
        }
        for (serial_ms, crosstalk_ms) in [(-0.1, 0.0), (0.0, f64::NAN), (1001.0, 0.0), (0.0, f64::INFINITY)] {
            let config =
                TargetConfig { shared: Some(SharedCosts { serial_ms, crosstalk_ms }), ..TargetConfig::default() };
            assert!(config.check().unwrap_err().to_string().contains("shared."), "{serial_ms} {crosstalk_ms}");
        }
        let zero =
            TargetConfig { shared: Some(SharedCosts { serial_ms: 0.0, crosstalk_ms: 0.0 }), ..TargetConfig::default() };
        assert!(zero.check().is_ok());
    }
}
