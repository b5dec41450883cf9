//! A VU's exchange over HTTP/2 (`target.http_version` "2" or "auto"): on its own connection,
//! whose streams it opens one request at a time, or on a connection of the worker's HTTP/2
//! pool, multiplexed with other VUs (`crate::transport::h2_pool`). Everything before and after the
//! exchange (rendering, checks, recording) is `http_step`'s, the same for both protocols.

use super::lane::{ExchangeError, Lane};
use crate::run::worker_state::WorkerState;
use crate::transport::h2_pool::H2Pool;
use crate::transport::http::{exchange_h2, open, H2Failure, H2Request, Http2Mode, Opened};
use horde_metrics::ErrorKind;

type Exchanged = Result<(u16, u64, u64), (ExchangeError, u64)>;

impl Lane {
    /// Over the VU's own connection: HTTP/2 once connected so, or HTTP/1.1 when ALPN chose it
    /// ("auto"), for the VU's life on that connection.
    pub(super) async fn own_h2_exchange(
        &mut self,
        state: &WorkerState,
        instance: usize,
        mode: Http2Mode,
        request: &[u8],
        h2_form: Option<&H2Request>,
        is_head: bool,
    ) -> Exchanged {
        let plan = &state.shared.plan;
        // A stream that found the connection closed (the server's idle timeout, a GOAWAY between
        // requests) never reached it: sent once more on a new connection, as over HTTP/1.1.
        for attempt in 0..2 {
            let reused = self.h2.is_some();
            if !reused {
                if self.connection.is_some() {
                    self.over_h2 = Some(false);
                    return self.exchange_unbounded(state, instance, request, is_head).await;
                }
                match open(&plan.connectors[instance], mode, &plan.http2_settings, plan.read_limits).await {
                    Ok(opened) => {
                        self.connected = true;
                        state.recorder.borrow_mut().connections_opened += 1;
                        match opened {
                            Opened::Http2(sender) => self.h2 = Some(Box::new(sender)),
                            Opened::Http1(connection) => {
                                self.connection = Some(connection);
                                self.over_h2 = Some(false);
                                return self.exchange_unbounded(state, instance, request, is_head).await;
                            }
                        }
                    }
                    Err((kind, detail)) => return Err((ExchangeError { kind, connecting: true, detail }, 0)),
                }
            }
            let sender = self.h2.as_mut().expect("connected above");
            let endpoint = &plan.endpoints[instance];
            self.over_h2 = Some(true);
            match exchange_h2(sender, endpoint, request, h2_form, &mut self.capture, plan.read_limits).await {
                Ok(outcome) => return Ok(outcome),
                Err(failure) => {
                    if failure.not_sent {
                        self.over_h2 = None;
                    }
                    if failure.connection_lost || failure.not_sent {
                        self.h2 = None;
                    }
                    if failure.not_sent && reused && attempt == 0 {
                        continue;
                    }
                    return Err(self.h2_failed(failure, request));
                }
            }
        }
        unreachable!("the second attempt always returns")
    }

    /// Over the next connection of the worker's pool, shared with the VUs that use it at the
    /// same time; the first VU to find its place empty connects, the others wait for it.
    pub(super) async fn pooled_h2_exchange(
        &mut self,
        state: &WorkerState,
        instance: usize,
        pool: &H2Pool,
        mode: Http2Mode,
        request: &[u8],
        h2_form: Option<&H2Request>,
    ) -> Exchanged {
        let plan = &state.shared.plan;
        let place = pool.place(instance);
        for attempt in 0..2 {
            let (number, reused, mut sender) = {
                let mut held = place.connection.lock().await;
                let reused = held.is_some();
                if !reused {
                    match open(&plan.connectors[instance], mode, &plan.http2_settings, plan.read_limits).await {
                        Ok(Opened::Http2(sender)) => {
                            self.connected = true;
                            state.recorder.borrow_mut().connections_opened += 1;
                            *held = Some((pool.number(), sender));
                        }
                        // A pool speaks HTTP/2 only ("auto" takes no pool: horde-plan refuses it).
                        Ok(Opened::Http1(_)) => {
                            let detail = "the server chose HTTP/1.1 for a pool of HTTP/2 connections".to_owned();
                            return Err((ExchangeError { kind: ErrorKind::H2Refused, connecting: true, detail }, 0));
                        }
                        Err((kind, detail)) => return Err((ExchangeError { kind, connecting: true, detail }, 0)),
                    }
                }
                let (number, sender) = held.as_ref().expect("connected above");
                (*number, reused, sender.clone())
            };
            let endpoint = &plan.endpoints[instance];
            self.over_h2 = Some(true);
            match exchange_h2(&mut sender, endpoint, request, h2_form, &mut self.capture, plan.read_limits).await {
                Ok(outcome) => return Ok(outcome),
                Err(failure) => {
                    if failure.not_sent {
                        self.over_h2 = None;
                    }
                    if failure.connection_lost || failure.not_sent {
                        let mut held = place.connection.lock().await;
                        if held.as_ref().is_some_and(|(held_number, _)| *held_number == number) {
                            *held = None;
                        }
                    }
                    if failure.not_sent && reused && attempt == 0 {
                        continue;
                    }
                    return Err(self.h2_failed(failure, request));
                }
            }
        }
        unreachable!("the second attempt always returns")
    }

    fn h2_failed(&mut self, failure: H2Failure, request: &[u8]) -> (ExchangeError, u64) {
        let sent = if failure.not_sent { 0 } else { request.len() as u64 };
        self.written = sent;
        (ExchangeError { kind: failure.kind, connecting: false, detail: failure.detail }, sent)
    }
}
