//! A VU's KCP session (`kcp://`): reliable, ordered messages over its own UDP socket, with
//! `ikcp.c`'s protocol and knobs (the `kcp` crate, a sans-IO port of it, driven here).
//!
//! The session (KCP's state, its socket, an impaired network's held datagrams) is shared by the
//! VU, a task of its own on the worker's `LocalSet` and the worker's KCP clock, all on one
//! thread. The VU hands a message to KCP and puts what KCP writes on the wire itself, at once
//! (as kcp-go does by default): a ping leaves as a UDP one does, with no hop through a task. The
//! task waits on the socket: it feeds KCP the datagrams that come in and hands the VU the
//! messages KCP reassembles. With an impaired network the datagrams go through the same draws
//! as plain UDP's, each way, before KCP sees them (the task sends and delivers them when they are
//! due), so KCP's retransmissions are the real answer to the loss. Retransmissions are counted
//! from the segments KCP writes: a data segment whose number was already sent is one.
//!
//! KCP wants an update every `interval_ms`. Ten thousand sessions each on a timer of its own would
//! put ten thousand timers in tokio's wheel, re-armed every 10 ms; instead a worker's sessions
//! share one clock ([`KcpClock`]), as `pause.rs` keeps a worker's pauses under one timer, and the
//! clock's one task updates the sessions itself, once per interval, and sends what they write.
//! Only a session with something due is on the clock's list: data sent and not yet acknowledged
//! (its resends), or datagrams taken in since its last flush (their ACKs, sent at the next tick
//! as `ikcp.c` does). An idle session (a ping answered and acknowledged, the next one not yet
//! sent) costs nothing per tick, and no session's task is woken by the clock: a ping costs the
//! VU's send, one wake of the session's task when the reply comes, and the VU's wake.

use super::datagram::{recv_datagram, try_recv_datagram};
use super::fine_timer::FineTimer;
use super::impair::{Held, Impairment, Way, WireCounts};
use horde_plan::{KcpOptions, Network};
use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::rc::{Rc, Weak};
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

/// KCP's command byte of a data segment, and its segment header's length (`ikcp.c`).
const PUSH: u8 = 81;
const HEADER: usize = 24;

/// The tick a worker's KCP sessions share: one ticker task (started with the first session of
/// the thread, ended once none is left) updates the sessions on its list.
pub(crate) struct KcpClock {
    due: RefCell<Vec<Weak<Shared>>>,
    /// Counts the ticks (for the tests).
    ticks: Cell<u64>,
}

thread_local! {
    static CLOCK: RefCell<Weak<KcpClock>> = const { RefCell::new(Weak::new()) };
}

impl KcpClock {
    /// This worker thread's clock, started at `interval` if it was not running.
    fn shared(interval: Duration) -> Rc<KcpClock> {
        CLOCK.with(|clock| {
            if let Some(running) = clock.borrow().upgrade() {
                return running;
            }
            let running = Rc::new(KcpClock { due: RefCell::new(Vec::new()), ticks: Cell::new(0) });
            let weak = Rc::downgrade(&running);
            tokio::task::spawn_local(async move {
                let mut ticks = tokio::time::interval(interval);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    let scheduled = ticks.tick().await;
                    // No session left: the ticker ends; the next session starts another.
                    let Some(clock) = weak.upgrade() else { return };
                    clock.tick(scheduled.elapsed() > interval);
                }
            });
            *clock.borrow_mut() = Rc::downgrade(&running);
            running
        })
    }

    /// One tick: each session on the list updated (its resends, its ACKs) and what it wrote
    /// sent; those with nothing more due leave the list. A tick `late` by more than an interval
    /// (the worker was stalled, its sessions' tasks too) first takes in what waits in each
    /// session's socket, so that the update does not resend what the peer has acknowledged.
    fn tick(&self, late: bool) {
        self.ticks.set(self.ticks.get() + 1);
        let due = std::mem::take(&mut *self.due.borrow_mut());
        let mut kept = Vec::with_capacity(due.len());
        for weak in due {
            let Some(shared) = weak.upgrade() else { continue };
            let still_due = {
                let mut session = shared.session.borrow_mut();
                if late && session.impairment.is_none() {
                    while let Ok(datagram) = try_recv_datagram(&shared.socket) {
                        shared.wire.received.set(shared.wire.received.get() + 1);
                        take_in(&shared, &mut session, &datagram);
                    }
                    if session.kcp.peeksize().is_ok() {
                        // A message for the VU: its task delivers it.
                        shared.poke.notify_one();
                    }
                }
                session.update();
                if std::mem::take(&mut session.acks_due) {
                    let _ = session.kcp.flush();
                }
                shared.output(&mut session);
                if session.kcp.is_dead_link() {
                    // The task says so to the VU.
                    shared.poke.notify_one();
                }
                session.kcp.wait_snd() > 0 && !session.kcp.is_dead_link()
            };
            if still_due {
                kept.push(weak);
            } else {
                shared.on_clock.set(false);
            }
        }
        // Sessions put on the list while this tick ran stay on it too.
        self.due.borrow_mut().extend(kept);
    }
}

/// Where KCP writes its datagrams: taken by the task after each call into KCP.
#[derive(Clone, Default)]
struct Written(Rc<RefCell<Vec<Vec<u8>>>>);

impl io::Write for Written {
    fn write(&mut self, datagram: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().push(datagram.to_vec());
        Ok(datagram.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The VU's side of a KCP session.
pub(crate) struct KcpLink {
    incoming: mpsc::UnboundedReceiver<io::Result<Vec<u8>>>,
    pub wire: Rc<WireCounts>,
    shared: Rc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for KcpLink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl KcpLink {
    pub fn start(
        socket: UdpSocket,
        options: KcpOptions,
        conv: u32,
        network: Option<Network>,
        seed: u64,
    ) -> io::Result<Self> {
        let (incoming_tx, incoming) = mpsc::unbounded_channel();
        let wire = Rc::new(WireCounts::default());
        let mut session = Session::new(options, conv);
        session.impairment = network.map(|network| Impairment::new(network, seed));
        session.update();
        // Only an impaired session holds datagrams, on the thread's fine timer (`fine_timer.rs`).
        let timer = if network.is_some() { Some(FineTimer::shared()?) } else { None };
        let shared = Rc::new(Shared {
            session: RefCell::new(session),
            socket,
            wire: Rc::clone(&wire),
            poke: Notify::new(),
            clock: KcpClock::shared(Duration::from_millis(u64::from(options.interval_ms))),
            on_clock: Cell::new(false),
            refused: Cell::new(None),
            timer,
        });
        let task = tokio::task::spawn_local(drive(Rc::clone(&shared), incoming_tx));
        Ok(Self { incoming, wire, shared, task })
    }

    /// Hands a message to KCP and puts what it writes on the wire at once (through the impaired
    /// network's draws when there is one).
    pub fn send(&self, message: Vec<u8>) -> io::Result<()> {
        let mut session = self.shared.session.borrow_mut();
        session.kcp.send(&message).map_err(|error| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("KCP refused the message: {error}"))
        })?;
        // Out at once rather than at the next update (kcp-go's default), pending ACKs with it.
        session.update();
        let _ = session.kcp.flush();
        session.acks_due = false;
        self.shared.output(&mut session);
        drop(session);
        self.shared.want_tick();
        Ok(())
    }

    pub async fn recv(&mut self) -> io::Result<Vec<u8>> {
        match self.incoming.recv().await {
            Some(result) => result,
            None => Err(io::Error::new(io::ErrorKind::BrokenPipe, "the KCP session's task ended")),
        }
    }
}

/// A session as the VU, its task and the clock share it.
struct Shared {
    session: RefCell<Session>,
    socket: UdpSocket,
    wire: Rc<WireCounts>,
    /// Wakes the task: datagrams held or left unsent for it, or a dead link to report.
    poke: Notify,
    clock: Rc<KcpClock>,
    /// On the clock's list.
    on_clock: Cell<bool>,
    /// The target's port is closed: a send failed with ECONNREFUSED (an ICMP port unreachable
    /// came back for an earlier datagram). The task tells the VU; KCP itself would resend into
    /// the closed port until its dead-link limit, each resend counted as loss.
    refused: Cell<Option<io::Error>>,
    /// The thread's fine timer, for an impaired network's held datagrams.
    timer: Option<Rc<FineTimer>>,
}

impl Shared {
    /// What KCP wrote, on its way: held by the impaired network (the task sends it when due), or
    /// sent now; a datagram the socket has no room for is left to the task.
    fn output(&self, session: &mut Session) {
        let written = session.take_written(&self.wire);
        if written.is_empty() {
            return;
        }
        let Session { impairment, held, unsent, .. } = session;
        if let Some(impairment) = impairment.as_mut() {
            for datagram in written {
                impairment.hold(held, Way::Out, datagram);
            }
            self.poke.notify_one();
            return;
        }
        for datagram in written {
            if !unsent.is_empty() {
                unsent.push(datagram);
                continue;
            }
            match self.socket.try_send(&datagram) {
                Ok(_) => self.wire.sent.set(self.wire.sent.get() + 1),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => unsent.push(datagram),
                Err(error) => self.failed_send(error),
            }
        }
        if !unsent.is_empty() {
            self.poke.notify_one();
        }
    }

    /// A datagram the socket refused: a closed port (ICMP) is kept for the task to report;
    /// anything else is as if the datagram were lost, and KCP resends it.
    fn failed_send(&self, error: io::Error) {
        if error.kind() == io::ErrorKind::ConnectionRefused {
            self.refused.set(Some(error));
            self.poke.notify_one();
        }
    }

    /// Puts the session on the clock's list when something is due and it is not there yet.
    fn want_tick(self: &Rc<Self>) {
        if self.on_clock.get() {
            return;
        }
        let due = {
            let session = self.session.borrow();
            session.acks_due || session.kcp.wait_snd() > 0
        };
        if due {
            self.on_clock.set(true);
            self.clock.due.borrow_mut().push(Rc::downgrade(self));
        }
    }
}

/// The KCP state machine, its clock, and what it wrote.
struct Session {
    kcp: kcp::Kcp<Written>,
    written: Written,
    started: Instant,
    /// The highest data segment number sent so far (retransmissions are those at or below it).
    highest_sent: Option<u32>,
    /// Datagrams went into KCP since its last flush: their ACKs are due at the next tick.
    acks_due: bool,
    /// Datagrams the socket had no room for: the task sends them.
    unsent: Vec<Vec<u8>>,
    /// The impaired network's draws, and the datagrams it holds (both ways) until they are due.
    impairment: Option<Impairment>,
    held: Held,
}

impl Session {
    fn new(options: KcpOptions, conv: u32) -> Self {
        let written = Written::default();
        let mut kcp = kcp::Kcp::new(conv, written.clone());
        kcp.set_nodelay(
            options.nodelay,
            options.interval_ms as i32,
            options.resend as i32,
            options.no_congestion_window,
        );
        kcp.set_wndsize(options.send_window, options.receive_window);
        // Bounds checked by the plan's validation (50 bytes or more).
        let _ = kcp.set_mtu(options.mtu as usize);
        Self {
            kcp,
            written,
            started: Instant::now(),
            highest_sent: None,
            acks_due: false,
            unsent: Vec::new(),
            impairment: None,
            held: BinaryHeap::new(),
        }
    }

    fn now_ms(&self) -> u32 {
        self.started.elapsed().as_millis() as u32
    }

    fn update(&mut self) {
        let now = self.now_ms();
        let _ = self.kcp.update(now);
    }

    /// What KCP wrote since the last call, its retransmitted data segments counted.
    fn take_written(&mut self, wire: &WireCounts) -> Vec<Vec<u8>> {
        let datagrams = std::mem::take(&mut *self.written.0.borrow_mut());
        for datagram in &datagrams {
            let mut offset = 0;
            while offset + HEADER <= datagram.len() {
                let header = &datagram[offset..offset + HEADER];
                let sn = u32::from_le_bytes([header[12], header[13], header[14], header[15]]);
                let length = u32::from_le_bytes([header[20], header[21], header[22], header[23]]) as usize;
                if header[4] == PUSH {
                    match self.highest_sent {
                        Some(highest) if sn.wrapping_sub(highest) as i32 <= 0 => {
                            wire.retransmitted.set(wire.retransmitted.get() + 1)
                        }
                        _ => self.highest_sent = Some(sn),
                    }
                }
                offset += HEADER + length;
            }
        }
        datagrams
    }
}

/// The session's task: datagrams in, messages out to the VU, and what the VU or the clock left
/// for it (datagrams held by the impaired network, or the socket's overflow, a dead link).
async fn drive(shared: Rc<Shared>, incoming: mpsc::UnboundedSender<io::Result<Vec<u8>>>) {
    let wire = Rc::clone(&shared.wire);
    loop {
        let (unsent, next_held) = {
            let mut session = shared.session.borrow_mut();
            // Each message read into a buffer of its own size: a session holds no large buffer.
            while let Ok(size) = session.kcp.peeksize() {
                let mut message = vec![0u8; size];
                let Ok(length) = session.kcp.recv(&mut message) else { break };
                message.truncate(length);
                if incoming.send(Ok(message)).is_err() {
                    return;
                }
            }
            if let Some(refused) = shared.refused.take() {
                let _ = incoming.send(Err(refused));
                return;
            }
            if session.kcp.is_dead_link() {
                let _ = incoming.send(Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    "KCP gave up: a segment was resent too often (dead link)",
                )));
                return;
            }
            (std::mem::take(&mut session.unsent), session.held.peek().map(|Reverse((due, ..))| *due))
        };
        for datagram in unsent {
            send(&shared, &datagram).await;
        }
        tokio::select! {
            biased;
            received = recv_datagram(&shared.socket) => match received {
                Ok(datagram) => {
                    wire.received.set(wire.received.get() + 1);
                    let mut session = shared.session.borrow_mut();
                    let session = &mut *session;
                    match session.impairment.as_mut() {
                        Some(impairment) => impairment.hold(&mut session.held, Way::In, datagram),
                        None => take_in(&shared, session, &datagram),
                    }
                }
                Err(error) => {
                    if incoming.send(Err(error)).is_err() {
                        return;
                    }
                }
            },
            // The VU or the clock left something for this task.
            _ = shared.poke.notified() => {}
            () = held_until(shared.timer.as_ref(), next_held), if next_held.is_some() => {
                let now = Instant::now();
                loop {
                    let next = {
                        let mut session = shared.session.borrow_mut();
                        if session.held.peek().is_some_and(|Reverse((due, ..))| *due <= now) { session.held.pop() } else { None }
                    };
                    let Some(Reverse((_, _, way, datagram))) = next else { break };
                    match way {
                        Way::Out => send(&shared, &datagram).await,
                        Way::In => take_in(&shared, &mut shared.session.borrow_mut(), &datagram),
                    }
                }
            }
        }
        shared.want_tick();
    }
}

/// A datagram into KCP (one not of this conversation is KCP's to refuse); its ACK is owed.
fn take_in(shared: &Shared, session: &mut Session, datagram: &[u8]) {
    let _ = session.kcp.input(datagram);
    session.acks_due = true;
    session.update();
    shared.output(session);
}

async fn send(shared: &Shared, datagram: &[u8]) {
    match shared.socket.send(datagram).await {
        Ok(_) => shared.wire.sent.set(shared.wire.sent.get() + 1),
        Err(error) => shared.failed_send(error),
    }
}

/// When the next held datagram is due, on the thread's fine timer (only an impaired session
/// holds any, and only it has the timer).
async fn held_until(timer: Option<&Rc<FineTimer>>, due: Option<Instant>) {
    let due = due.unwrap_or_else(Instant::now);
    match timer {
        Some(timer) => timer.sleep_until(due).await,
        None => tokio::time::sleep_until(due).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workers_sessions_share_one_clock_that_ends_with_them() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, async {
            let first = KcpClock::shared(Duration::from_millis(10));
            let second = KcpClock::shared(Duration::from_millis(10));
            assert!(Rc::ptr_eq(&first, &second), "one ticker per worker thread");
            tokio::time::sleep(Duration::from_millis(60)).await;
            assert!(first.ticks.get() >= 2, "the clock ticks");
            drop((first, second));
            assert!(CLOCK.with(|clock| clock.borrow().upgrade().is_none()), "no session, no clock");
            let third = KcpClock::shared(Duration::from_millis(10));
            tokio::time::sleep(Duration::from_millis(60)).await;
            assert!(third.ticks.get() >= 2, "a new ticker for a new session");
        });
    }
}
