//! A VU's KCP session (`kcp://`): reliable, ordered messages over its own UDP socket, with
//! `ikcp.c`'s protocol and knobs (the `kcp` crate, a sans-IO port of it, driven here).
//!
//! A task on the worker's `LocalSet` owns the socket and the session: it hands the VU's messages
//! to KCP and sends at once what KCP writes (as kcp-go does by default), feeds KCP the datagrams
//! that come in, delivers the messages KCP reassembles, and calls KCP's update when its `check`
//! says. With an impaired network the datagrams go through the same draws as plain UDP's, each
//! way, before KCP sees them, so KCP's retransmissions are the real answer to the loss.
//! Retransmissions are counted from the segments KCP writes: a data segment whose number was
//! already sent is a retransmission.
//!
//! KCP wants an update every `interval_ms`. Ten thousand sessions each on a timer of its own would
//! put ten thousand timers in tokio's wheel, re-armed every 10 ms; instead a worker's sessions
//! share one clock ([`KcpClock`]): a single ticker task wakes every waiting session once per
//! interval, as `pause.rs` keeps a worker's pauses under one timer. Only datagrams held by an
//! impaired network take timers of their own, while they are held. And only a session with
//! something due waits for the tick: data sent and not yet acknowledged (its resends), or
//! datagrams taken in since its last flush (their ACKs, sent at the next tick as `ikcp.c`
//! does). An idle session (a ping answered and acknowledged, the next one not yet sent) sleeps
//! until its VU or the network wakes it: a session pinging every 100 ms is woken by the tick a
//! few times per ping rather than 100 times a second.

use super::connection::recv_datagram;
use super::impair::{Held, Impairment, Way, WireCounts};
use horde_plan::{KcpOptions, Network};
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::rc::Rc;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// KCP's command byte of a data segment, and its segment header's length (`ikcp.c`).
const PUSH: u8 = 81;
const HEADER: usize = 24;

/// The tick a worker's KCP sessions share: one ticker task (started with the first session of
/// the thread, ended once none is left) notifies every session waiting for it.
pub(crate) struct KcpClock {
    tick: tokio::sync::Notify,
}

thread_local! {
    static CLOCK: RefCell<std::rc::Weak<KcpClock>> = const { RefCell::new(std::rc::Weak::new()) };
}

impl KcpClock {
    /// This worker thread's clock, started at `interval` if it was not running.
    fn shared(interval: Duration) -> Rc<KcpClock> {
        CLOCK.with(|clock| {
            if let Some(running) = clock.borrow().upgrade() {
                return running;
            }
            let running = Rc::new(KcpClock { tick: tokio::sync::Notify::new() });
            let weak = Rc::downgrade(&running);
            tokio::task::spawn_local(async move {
                let mut ticks = tokio::time::interval(interval);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    ticks.tick().await;
                    // No session left: the ticker ends; the next session starts another.
                    let Some(clock) = weak.upgrade() else { return };
                    clock.tick.notify_waiters();
                }
            });
            *clock.borrow_mut() = Rc::downgrade(&running);
            running
        })
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
    outgoing: mpsc::UnboundedSender<Vec<u8>>,
    incoming: mpsc::UnboundedReceiver<io::Result<Vec<u8>>>,
    pub wire: Rc<WireCounts>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for KcpLink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl KcpLink {
    pub fn start(socket: UdpSocket, options: KcpOptions, conv: u32, network: Option<Network>, seed: u64) -> Self {
        let (outgoing, outgoing_rx) = mpsc::unbounded_channel();
        let (incoming_tx, incoming) = mpsc::unbounded_channel();
        let wire = Rc::new(WireCounts::default());
        let impairment = network.map(|network| Impairment::new(network, seed));
        let session = Session::new(options, conv);
        let clock = KcpClock::shared(Duration::from_millis(u64::from(options.interval_ms)));
        let task = tokio::task::spawn_local(drive(socket, session, clock, impairment, outgoing_rx, incoming_tx, Rc::clone(&wire)));
        Self { outgoing, incoming, wire, task }
    }

    pub fn send(&self, message: Vec<u8>) -> io::Result<()> {
        self.outgoing.send(message).map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the KCP session's task ended"))
    }

    pub async fn recv(&mut self) -> io::Result<Vec<u8>> {
        match self.incoming.recv().await {
            Some(result) => result,
            None => Err(io::Error::new(io::ErrorKind::BrokenPipe, "the KCP session's task ended")),
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
}

impl Session {
    fn new(options: KcpOptions, conv: u32) -> Self {
        let written = Written::default();
        let mut kcp = kcp::Kcp::new(conv, written.clone());
        kcp.set_nodelay(options.nodelay, options.interval_ms as i32, options.resend as i32, options.no_congestion_window);
        kcp.set_wndsize(options.send_window, options.receive_window);
        // Bounds checked by the plan's validation (50 bytes or more).
        let _ = kcp.set_mtu(options.mtu as usize);
        Self { kcp, written, started: Instant::now(), highest_sent: None }
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
                        Some(highest) if sn.wrapping_sub(highest) as i32 <= 0 => wire.retransmitted.set(wire.retransmitted.get() + 1),
                        _ => self.highest_sent = Some(sn),
                    }
                }
                offset += HEADER + length;
            }
        }
        datagrams
    }
}

async fn drive(
    socket: UdpSocket,
    mut session: Session,
    clock: Rc<KcpClock>,
    mut impairment: Option<Impairment>,
    mut outgoing: mpsc::UnboundedReceiver<Vec<u8>>,
    incoming: mpsc::UnboundedSender<io::Result<Vec<u8>>>,
    wire: Rc<WireCounts>,
) {
    let mut held: Held = BinaryHeap::new();
    session.update();
    // Datagrams went into KCP since its last flush: their ACKs are due at the next tick.
    let mut acks_due = false;
    loop {
        for datagram in session.take_written(&wire) {
            match impairment.as_mut() {
                Some(impairment) => impairment.hold(&mut held, Way::Out, datagram),
                None => send(&socket, &datagram, &wire).await,
            }
        }
        // Each message read into a buffer of its own size: a session holds no large buffer.
        while let Ok(size) = session.kcp.peeksize() {
            let mut message = vec![0u8; size];
            let Ok(length) = session.kcp.recv(&mut message) else { break };
            message.truncate(length);
            if incoming.send(Ok(message)).is_err() {
                return;
            }
        }
        if session.kcp.is_dead_link() {
            let _ = incoming.send(Err(io::Error::new(io::ErrorKind::ConnectionReset, "KCP gave up: a segment was resent too often (dead link)")));
            return;
        }
        let next_held = held.peek().map(|Reverse((due, ..))| *due);
        let tick_due = acks_due || session.kcp.wait_snd() > 0;
        tokio::select! {
            biased;
            // What came in first: after a stall (a starved worker) the tick and the peer's ACKs
            // are ready together, and an update before the ACKs would resend what they acknowledge.
            received = recv_datagram(&socket) => match received {
                Ok(datagram) => {
                    wire.received.set(wire.received.get() + 1);
                    match impairment.as_mut() {
                        Some(impairment) => impairment.hold(&mut held, Way::In, datagram),
                        None => {
                            let _ = session.kcp.input(&datagram);
                            acks_due = true;
                        }
                    }
                    session.update();
                }
                Err(error) => {
                    if incoming.send(Err(error)).is_err() {
                        return;
                    }
                }
            },
            // KCP's own pace: its update decides whether a resend is due; the ACKs go out now
            // whatever the update decided (its last flush may have been less than an interval ago).
            _ = clock.tick.notified(), if tick_due => {
                session.update();
                if std::mem::take(&mut acks_due) {
                    let _ = session.kcp.flush();
                }
            }
            _ = tokio::time::sleep_until(next_held.unwrap_or_else(Instant::now)), if next_held.is_some() => {
                let now = Instant::now();
                while held.peek().is_some_and(|Reverse((due, ..))| *due <= now) {
                    let Some(Reverse((_, _, way, datagram))) = held.pop() else { break };
                    match way {
                        Way::Out => send(&socket, &datagram, &wire).await,
                        // A datagram not of this conversation is KCP's to refuse.
                        Way::In => {
                            let _ = session.kcp.input(&datagram);
                            acks_due = true;
                        }
                    }
                }
                session.update();
            }
            next = outgoing.recv() => match next {
                Some(next) => {
                    if let Err(error) = session.kcp.send(&next) {
                        let _ = incoming.send(Err(io::Error::new(io::ErrorKind::InvalidInput, format!("KCP refused the message: {error}"))));
                    }
                    // Out at once rather than at the next update (kcp-go's default), pending
                    // ACKs with it.
                    session.update();
                    let _ = session.kcp.flush();
                    acks_due = false;
                }
                None => return,
            },
        }
    }
}

async fn send(socket: &UdpSocket, datagram: &[u8], wire: &WireCounts) {
    // A send error (the target's port closed: ICMP) shows on a later receive.
    if socket.send(datagram).await.is_ok() {
        wire.sent.set(wire.sent.get() + 1);
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
            tokio::time::timeout(Duration::from_millis(500), first.tick.notified()).await.expect("a tick reaches a waiting session");
            drop((first, second));
            assert!(CLOCK.with(|clock| clock.borrow().upgrade().is_none()), "no session, no clock");
            let third = KcpClock::shared(Duration::from_millis(10));
            tokio::time::timeout(Duration::from_millis(500), third.tick.notified()).await.expect("a new ticker for a new session");
        });
    }
}
