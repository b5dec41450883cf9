//! A `parallel` group: the VU sends its requests at once, as a browser fetches a page's
//! resources, and waits for all of them.
//!
//! Each request runs on a lane of its own (`vu/lane.rs`). Over HTTP/2 every request is a
//! stream: of the VU's connection (opened first when it has none, so that the streams share
//! it) or of the pool's, all at once. Over HTTP/1.1 a connection carries one request at a time,
//! so the VU uses up to `target.parallel_connections` of them (its own and extra ones it keeps
//! for its next group, a browser's connections per host); the requests past that wait for a
//! free one, in step order, and the wait is part of their latency. With an HTTP/1.1 pool each
//! lane borrows a pool connection per request, as a lone request does.
//!
//! Each request keeps its own metrics (latency from the group's start, or from the intended
//! start in the open model, status, errors, checks). What a response sets in the VU (cookies,
//! extracted variables) is applied once every request has ended, in step order: when two
//! requests extract the same variable, the later step's value wins, and no request of the
//! group sees what another extracts.

use super::http_step::{Done, Prepared};
use super::lane::ExchangeError;
use super::{Flow, InFlight, Vu};
use crate::exchange::Exchange;
use crate::run::worker_state::WorkerState;
use crate::scenario::interpreter::RequestNode;
use crate::transport::http::{open, Opened};
use horde_metrics::ErrorKind;
use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

/// One request of the group, prepared to go.
struct Ready<'n> {
    node: &'n RequestNode,
    prepared: Prepared<'n>,
    exchange: Option<Exchange>,
}

impl Vu {
    pub(super) async fn parallel(
        &mut self,
        state: &WorkerState,
        requests: &[RequestNode],
        intended: Option<Instant>,
    ) -> Flow {
        let started = intended.unwrap_or_else(Instant::now);
        let mut ready = Vec::with_capacity(requests.len());
        for node in requests {
            let recording = state.shared.recording.as_ref().is_some_and(|recording| recording.claim(node.global_index));
            // A request whose template failed is counted as such (`prepare`) and not sent.
            if let Some(prepared) = self.prepare(state, node, started, recording) {
                let exchange =
                    recording.then(|| self.request_record(state, node.global_index, started, prepared.bytes()));
                ready.push(Ready { node, prepared, exchange });
            }
        }
        if ready.is_empty() {
            return Flow::Continue;
        }
        self.sent += ready.len() as u64;
        let sent_at = intended.map(|_| Instant::now());
        let mut guards: Vec<InFlight<'_>> =
            ready.iter().map(|item| InFlight { state, index: item.node.global_index, started, ended: false }).collect();
        let done = match self.connect_for_streams(state).await {
            Ok(()) => self.exchange_all(state, &ready).await,
            // The VU's HTTP/2 connection could not be opened: every request of the group fails
            // as a lone request would have.
            Err(error) => ready
                .iter()
                .map(|_| {
                    (
                        Done { outcome: Err((error.clone(), 0)), ended: Instant::now(), over_h2: None },
                        Default::default(),
                    )
                })
                .collect(),
        };
        for guard in &mut guards {
            guard.ended = true;
        }
        drop(guards);
        let mut end_iteration = false;
        let mut back_off = false;
        for (item, (done, mut capture)) in ready.into_iter().zip(done) {
            let Ready { node, prepared, exchange } = item;
            let (ends, backs_off) =
                self.finish_request(state, node, started, sent_at, done, &mut capture, &prepared.path, exchange);
            end_iteration |= ends;
            back_off |= backs_off;
        }
        self.end_step(state, back_off, None, end_iteration).await
    }

    /// With its own HTTP/2 connection ("2" or "auto", no pool), the VU opens it before the
    /// group when it has none, so that the group's streams share one connection rather than
    /// each opening its own; the time it takes is part of every request's latency, as it would
    /// be of the first one's alone.
    async fn connect_for_streams(&mut self, state: &WorkerState) -> Result<(), ExchangeError> {
        let plan = &state.shared.plan;
        let Some(mode) = plan.http2 else { return Ok(()) };
        if state.pool.is_some() || state.h2_pool.is_some() || self.lane.h2.is_some() || self.lane.connection.is_some() {
            return Ok(());
        }
        let opening = open(&plan.connectors[self.instance], mode, &plan.http2_settings, plan.read_limits);
        match tokio::time::timeout(plan.request_timeout, opening).await {
            Ok(Ok(opened)) => {
                self.backoff = Duration::ZERO;
                state.recorder.borrow_mut().connections_opened += 1;
                match opened {
                    Opened::Http2(sender) => self.lane.h2 = Some(Box::new(sender)),
                    Opened::Http1(connection) => self.lane.connection = Some(connection),
                }
                Ok(())
            }
            Ok(Err((kind, detail))) => Err(ExchangeError { kind, connecting: true, detail }),
            Err(_) => {
                let detail =
                    format!("no connection within {} ms (target.request_timeout_ms)", plan.request_timeout.as_millis());
                Err(ExchangeError { kind: ErrorKind::Timeout, connecting: true, detail })
            }
        }
    }

    /// Every request of the group exchanged, on as many lanes as run at once; each one's end
    /// and response, in step order.
    async fn exchange_all(
        &mut self,
        state: &WorkerState,
        ready: &[Ready<'_>],
    ) -> Vec<(Done, crate::transport::http::Capture)> {
        let plan = &state.shared.plan;
        let multiplexed = self.lane.h2.is_some() || state.h2_pool.is_some();
        let width = if multiplexed { ready.len() } else { ready.len().min(plan.parallel_connections) };
        let mut lanes = Vec::with_capacity(width);
        lanes.push(std::mem::take(&mut self.lane));
        while lanes.len() < width {
            let mut lane = self.extra_lanes.pop().unwrap_or_default();
            // Streams of the VU's own HTTP/2 connection.
            lane.h2.clone_from(&lanes[0].h2);
            lanes.push(lane);
        }
        let next = Cell::new(0);
        let results: RefCell<Vec<Option<(Done, crate::transport::http::Capture)>>> =
            RefCell::new((0..ready.len()).map(|_| None).collect());
        let instance = self.instance;
        let runs = lanes.iter_mut().map(|lane| {
            let (next, results) = (&next, &results);
            async move {
                loop {
                    let index = next.get();
                    let Some(item) = ready.get(index) else { break };
                    next.set(index + 1);
                    lane.capture.keep_body = item.node.keep_body;
                    lane.capture.keep_headers = item.node.keep_headers;
                    lane.capture.record = item.exchange.is_some();
                    // Each request's timeout runs from its own send (a lane sends its next
                    // request when the one before is answered).
                    let outcome = lane
                        .exchange(
                            state,
                            instance,
                            item.prepared.bytes(),
                            item.prepared.h2,
                            item.node.is_head,
                            Instant::now(),
                        )
                        .await;
                    let done = Done { outcome, ended: Instant::now(), over_h2: lane.over_h2.take() };
                    // The response stays whole until the group ends (its extractors run then);
                    // the lane reads its next one into a new capture.
                    results.borrow_mut()[index] = Some((done, std::mem::take(&mut lane.capture)));
                }
            }
        });
        futures_util::future::join_all(runs).await;
        let mut lanes = lanes.into_iter();
        self.lane = lanes.next().expect("one lane at least");
        if self.lane.connected {
            self.backoff = Duration::ZERO;
        }
        for mut lane in lanes {
            if std::mem::take(&mut lane.connected) {
                self.backoff = Duration::ZERO;
            }
            // Only an HTTP/1.1 connection is kept on an extra lane: an HTTP/2 one is the VU's own.
            lane.h2 = None;
            self.extra_lanes.push(lane);
        }
        self.lane.connected = false;
        results.into_inner().into_iter().map(|result| result.expect("every request ran")).collect()
    }
}
