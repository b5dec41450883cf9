//! A virtual user: its connection, its buffer, its random stream, and how it runs an iteration.

use crate::compiled::{CompiledScenario, CompiledStep};
use crate::http::{read_response, Connection};
use crate::think::{self, VuRandom};
use crate::worker::WorkerState;
use horde_metrics::ErrorKind;
use std::time::Instant;

/// How an iteration ended, as far as the VU's loop cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IterationEnd {
    Completed,
    /// The last step could not even connect (refused, DNS...).
    ConnectFailed,
    Stopped,
}

/// Why one exchange failed, and whether it failed before reaching the target.
#[derive(Debug, Clone, Copy)]
struct ExchangeError {
    kind: ErrorKind,
    connecting: bool,
}

pub(crate) struct Vu {
    connection: Option<Connection>,
    /// Reused for every response this VU reads; grows only for very large response heads.
    buffer: Vec<u8>,
    random: VuRandom,
    /// Bytes of the current request already written: still counted when the response times out.
    written: u64,
}

impl Vu {
    /// `number` is the VU's number in the whole run (unique across workers).
    pub fn new(number: u64) -> Self {
        Self { connection: None, buffer: Vec::new(), random: VuRandom::new(number), written: 0 }
    }

    /// Runs the scenario's steps once. `intended` is the arrival's intended instant in the
    /// open model: the first request is timed from it, so any lateness counts as latency.
    pub async fn run_iteration(&mut self, state: &WorkerState, scenario: &CompiledScenario, intended: Option<Instant>) -> IterationEnd {
        let mut end = IterationEnd::Completed;
        for (position, step) in scenario.steps.iter().enumerate() {
            if position > 0 && state.stopping.get() {
                return IterationEnd::Stopped;
            }
            let started = match intended {
                Some(instant) if position == 0 => instant,
                _ => Instant::now(),
            };
            let outcome = self.exchange(state, step).await;
            let latency_us = started.elapsed().as_micros() as u64;
            let (result, sent, received) = match outcome {
                Ok((status, sent, received)) if status < 400 => (Ok(()), sent, received),
                Ok((status, sent, received)) => (Err(ErrorKind::Status(status)), sent, received),
                Err((error, sent)) => {
                    end = if error.connecting { IterationEnd::ConnectFailed } else { IterationEnd::Completed };
                    (Err(error.kind), sent, 0)
                }
            };
            state.recorder.borrow_mut().steps[step.global_index].record(latency_us, result, sent, received);
            if let Some(think_time) = &step.think_time {
                let pause = think::draw(think_time, &mut self.random);
                // Registered before the flag is read, so a stop between the two still wakes us;
                // a stop that came earlier (during the request) skips the pause altogether.
                let stopped = state.stop_notify.notified();
                tokio::pin!(stopped);
                stopped.as_mut().enable();
                if !pause.is_zero() && !state.stopping.get() {
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = stopped => {}
                    }
                }
            }
        }
        end
    }

    /// Sends one request and reads its response within the request timeout.
    /// Ok: (status, bytes sent, bytes received); Err: (why, bytes sent).
    async fn exchange(&mut self, state: &WorkerState, step: &CompiledStep) -> Result<(u16, u64, u64), (ExchangeError, u64)> {
        let plan = &state.shared.plan;
        self.written = 0;
        match tokio::time::timeout(plan.request_timeout, self.exchange_unbounded(state, step)).await {
            Ok(result) => result,
            Err(_) => {
                self.connection = None;
                Err((ExchangeError { kind: ErrorKind::Timeout, connecting: false }, self.written))
            }
        }
    }

    async fn exchange_unbounded(&mut self, state: &WorkerState, step: &CompiledStep) -> Result<(u16, u64, u64), (ExchangeError, u64)> {
        let request = &step.request;
        // A kept-alive connection may have been closed by the server while idle; that shows as
        // a failure before any response byte, and the request is then sent once more on a new
        // connection, as browsers and HTTP libraries do.
        for attempt in 0..2 {
            let reused = self.connection.is_some();
            if !reused {
                match state.shared.plan.connector.connect().await {
                    Ok(connection) => {
                        self.connection = Some(connection);
                        state.recorder.borrow_mut().connections_opened += 1;
                    }
                    Err(kind) => return Err((ExchangeError { kind, connecting: true }, 0)),
                }
            }
            let connection = self.connection.as_mut().expect("connected above");
            if let Err(error) = connection.write_all(&request.bytes).await {
                self.connection = None;
                if reused && attempt == 0 {
                    continue;
                }
                return Err((ExchangeError { kind: ErrorKind::from_io(&error), connecting: false }, 0));
            }
            let sent = request.bytes.len() as u64;
            self.written = sent;
            match read_response(connection, &mut self.buffer, request.is_head).await {
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
                    return Err((ExchangeError { kind: error.kind, connecting: false }, sent));
                }
            }
        }
        unreachable!("the second attempt always returns")
    }
}
