//! A lane: what one request in flight needs of its own — a connection (HTTP/1.1, or HTTP/2's
//! handle), the read buffer, the capture of its response. A VU has one for its requests one at
//! a time, and more for the requests of a `parallel` group, which run at once
//! (`vu/parallel_step.rs`). The exchange over each transport (`http2_step.rs` for HTTP/2) is
//! the lane's, not the VU's, so that several run side by side.

use crate::run::worker_state::WorkerState;
use crate::transport::http::{read_response, Capture, Connection, H2Request, H2Sender};
use crate::transport::pool::Pool;
use horde_metrics::ErrorKind;
use std::time::Instant;

/// Why one exchange failed, in words too (the error detail), and whether it failed before
/// reaching the target.
#[derive(Debug, Clone)]
pub(super) struct ExchangeError {
    pub kind: ErrorKind,
    pub connecting: bool,
    pub detail: String,
}

#[derive(Default)]
pub(super) struct Lane {
    pub connection: Option<Connection>,
    /// Its HTTP/2 connection (`target.http_version` "2" or "auto", no pool); boxed so that a
    /// VU of an HTTP/1.1 plan carries one word for it.
    pub h2: Option<Box<H2Sender>>,
    /// Reused for every response read on this lane; grows only for very large response heads.
    pub buffer: Vec<u8>,
    pub capture: Capture,
    /// Bytes of the current request already written: still counted when the response times out.
    pub written: u64,
    /// With `http_version` "2" or "auto": the protocol the current request went over
    /// (`Some(true)`: HTTP/2), `None` while it reached no connection (the step's `http1` and
    /// `http2` counts).
    pub over_h2: Option<bool>,
    /// A connection was opened during the last exchange: the VU's connect back-off restarts.
    pub connected: bool,
}

/// Instance `instance` of the target as `host:port`, for error details.
fn address(state: &WorkerState, instance: usize) -> String {
    let endpoint = &state.shared.plan.endpoints[instance];
    format!("{}:{}", endpoint.host, endpoint.port)
}

impl Lane {
    /// Sends one request and reads its response within the request timeout, counted from
    /// `from` (the request's send, read by the caller).
    /// Ok: (status, bytes sent, bytes received); Err: (why, bytes sent).
    /// With a pool, waiting for a connection is part of the exchange: its time and timeout.
    pub(super) async fn exchange(
        &mut self,
        state: &WorkerState,
        instance: usize,
        request: &[u8],
        h2_form: Option<&H2Request>,
        is_head: bool,
        from: Instant,
    ) -> Result<(u16, u64, u64), (ExchangeError, u64)> {
        let plan = &state.shared.plan;
        self.written = 0;
        let exchange = async {
            match (&state.pool, plan.http2) {
                (None, None) => self.exchange_unbounded(state, instance, request, is_head).await,
                (Some(pool), _) => self.pooled_exchange(state, instance, pool, request, is_head).await,
                // Boxed: an HTTP/2 exchange's future is twice an HTTP/1.1 one's (about 3 KB
                // against 1.5), and every request's future would be that size, copied at each
                // step, whatever its protocol.
                (None, Some(mode)) => match &state.h2_pool {
                    None => Box::pin(self.own_h2_exchange(state, instance, mode, request, h2_form, is_head)).await,
                    Some(pool) => {
                        Box::pin(self.pooled_h2_exchange(state, instance, pool, mode, request, h2_form)).await
                    }
                },
            }
        };
        // The worker's one deadline list, not a timer entry per request (`crate::time::deadline`).
        match state.deadlines.within(tokio::time::Instant::from_std(from), plan.request_timeout, exchange).await {
            Some(result) => result,
            None => {
                // An HTTP/1.1 connection is left mid-response; an HTTP/2 one is kept, the
                // stream being cancelled (RST_STREAM) when its future is dropped.
                self.connection = None;
                let detail = format!(
                    "no whole response within {} ms (target.request_timeout_ms)",
                    plan.request_timeout.as_millis()
                );
                Err((ExchangeError { kind: ErrorKind::Timeout, connecting: false, detail }, self.written))
            }
        }
    }

    /// One exchange over a connection of the pool: the lease's connection and buffer are the
    /// VU's for the exchange, and go back to the pool when the lease drops (the connection only
    /// if still usable: `exchange_unbounded` drops one that failed or was closed).
    async fn pooled_exchange(
        &mut self,
        state: &WorkerState,
        instance: usize,
        pool: &Pool,
        request: &[u8],
        is_head: bool,
    ) -> Result<(u16, u64, u64), (ExchangeError, u64)> {
        let mut lease = pool.acquire(instance).await;
        self.connection = lease.connection.take();
        std::mem::swap(&mut self.buffer, &mut lease.buffer);
        let result = self.exchange_unbounded(state, instance, request, is_head).await;
        std::mem::swap(&mut self.buffer, &mut lease.buffer);
        lease.connection = self.connection.take();
        result
    }

    pub(super) async fn exchange_unbounded(
        &mut self,
        state: &WorkerState,
        instance: usize,
        request: &[u8],
        is_head: bool,
    ) -> Result<(u16, u64, u64), (ExchangeError, u64)> {
        // A kept-alive connection may have been closed by the server while idle; that shows as
        // a failure before any response byte, and the request is then sent once more on a new
        // connection, as browsers and HTTP libraries do.
        for attempt in 0..2 {
            let reused = self.connection.is_some();
            if !reused {
                match state.shared.plan.connectors[instance].connect_detailed().await {
                    Ok(connection) => {
                        self.connection = Some(connection);
                        self.connected = true;
                        state.recorder.borrow_mut().connections_opened += 1;
                    }
                    Err((kind, detail)) => return Err((ExchangeError { kind, connecting: true, detail }, 0)),
                }
            }
            let connection = self.connection.as_mut().expect("connected above");
            if let Err(error) = connection.write_all(request).await {
                self.connection = None;
                if reused && attempt == 0 {
                    continue;
                }
                let detail = format!("{error} while sending the request to {}", address(state, instance));
                return Err((ExchangeError { kind: ErrorKind::from_io(&error), connecting: false, detail }, 0));
            }
            let sent = request.len() as u64;
            self.written = sent;
            match read_response(connection, &mut self.buffer, is_head, &mut self.capture, state.shared.plan.read_limits)
                .await
            {
                Ok(response) => {
                    if !response.keep_alive {
                        self.connection = None;
                    }
                    return Ok((response.status, sent, response.bytes_received));
                }
                Err(error) => {
                    self.connection = None;
                    if reused && attempt == 0 && error.nothing_received {
                        continue;
                    }
                    let why = match error.kind {
                        ErrorKind::Reset => "the connection closed before the response ended".to_owned(),
                        ErrorKind::Protocol => "the response is not valid HTTP/1.1".to_owned(),
                        ErrorKind::HeadersTooLarge => format!(
                            "the response head passed target.max_response_header_bytes ({} bytes)",
                            state.shared.plan.read_limits.max_head_bytes
                        ),
                        kind => format!("{} while reading the response", kind.label()),
                    };
                    let detail = format!("{why} ({})", address(state, instance));
                    return Err((ExchangeError { kind: error.kind, connecting: false, detail }, sent));
                }
            }
        }
        unreachable!("the second attempt always returns")
    }
}
