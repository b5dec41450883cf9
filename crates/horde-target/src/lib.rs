//! The built-in target: a small HTTP/1.1 server whose answers are known in advance, used for
//! demos and for known-answer tests of Horde's numbers.
//!
//! A load tester is only trustworthy if its figures can be checked. This target makes that
//! possible: a `/delay/50` request takes 50 ms, so a measured p50 far from 50 ms is the
//! generator's error; a capacity of `W` workers at `S` ms each serves exactly `W * 1000 / S`
//! requests per second, so a measured maximum throughput elsewhere is wrong; a stall freezes
//! the target for a known time, so an open-model run that does not show it in its high
//! percentiles suffers from coordinated omission.
//!
//! The target runs on a thread of its own with its own tokio runtime ([`TargetHandle::start`]),
//! so it can be started from plain Rust, from Python through `horde-py`, or from the engine's
//! integration tests, and it stops within a bounded time ([`TargetHandle::stop`] or drop).
//!
//! # Endpoints
//!
//! Any method; request bodies are read and discarded; connections are kept alive; every
//! response carries `Content-Length` (except those HTTP forbids a body: `204`, `304`).
//!
//! | path | response |
//! | --- | --- |
//! | `/` | `200`, body `ok\n` (`text/plain`) |
//! | `/delay/{ms}` | `200` `ok\n` after `ms` milliseconds (integer or decimal) from arrival |
//! | `/status/{code}` | that status, `200` to `599` (a `1xx` is refused with `400`) |
//! | `/bytes/{n}` | `200` with exactly `n` zero bytes, `n` at most 16 MiB (`400` beyond) |
//! | `/stall/{ms}` | `200` at once; every other request arriving in the next `ms` milliseconds waits until the stall ends. Requests already in service are not affected; a later stall extends an earlier one |
//! | anything else | `404` |
//!
//! A malformed number gets `400` with a one-line reason. Delays and stalls are at most one hour.
//!
//! # Capacity model
//!
//! With [`TargetConfig::capacity`] set to [`Capacity`] `{ workers: W, service_ms: S }`, every
//! request except `/stall/...` is served by one of `W` workers and takes `S` ms of service
//! (plus its delay, for `/delay/{ms}`: the delay is served inside the worker's slot). The
//! workers are virtual: completion instants are computed from when each worker becomes free,
//! so tokio's millisecond timer granularity and late wake-ups do not lower the throughput. A
//! stall applies first (the request's arrival becomes the stall's end), then the queue.
//!
//! # Example
//!
//! ```
//! use horde_target::{Capacity, TargetConfig, TargetHandle};
//!
//! let target = TargetHandle::start(TargetConfig {
//!     capacity: Some(Capacity { workers: 4, service_ms: 20.0 }), // at most 200 requests/s
//!     ..TargetConfig::default()
//! })?;
//! println!("load it at {}", target.base_url());
//! target.stop();
//! # Ok::<(), horde_target::TargetError>(())
//! ```

mod capacity;
mod config;
mod routes;
mod server;
mod service;
mod stall;

pub use config::{Capacity, TargetConfig, TargetError};
pub use server::TargetHandle;
