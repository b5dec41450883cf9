//! The impaired network (`scenario.network`) a VU's UDP datagrams go through, both ways.
//!
//! A VU with an impaired network does not use its socket itself: a task on the worker's
//! `LocalSet` owns the socket and holds every datagram, outgoing and incoming, in one queue by
//! due time, delayed (delay ± jitter), dropped, duplicated or held back past later ones (reorder)
//! by draws from a random stream seeded by `network.seed` and the VU number, so the same plan
//! impairs the same way. The draws are `horde_link::Impairment`'s, which `horde link` applies
//! to IP packets (TCP and any protocol) the same way. The VU hands datagrams to the task and
//! takes delivered ones from it through channels; the task ends when the VU drops its side (a
//! `close`, the VU's end).
//!
//! With `network.rate_limit` each way is a link of that many bytes a second, the
//! `horde_link::Bottleneck` that `horde link --rate-mbit` puts in front of IP packets too: a
//! token bucket one Ethernet frame deep filled at the rate, a datagram leaving once the bucket
//! holds its size, in order, then delayed as above. Datagrams wait their turn in a queue of
//! [`QUEUE_WAIT`]: one that would wait longer is dropped (tail drop), so a link offered more than
//! its rate carries its rate and adds up to that wait to the round trip. The bucket draws nothing
//! at random: the random stream is the same with or without it.

use super::fine_timer::FineTimer;
use horde_link::Bottleneck;
use horde_plan::Network;
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::rc::Rc;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Datagrams the task put on the wire and took off it, and KCP's retransmitted segments (read
/// by the VU after each step).
#[derive(Default)]
pub(crate) struct WireCounts {
    pub sent: Cell<u64>,
    pub received: Cell<u64>,
    pub retransmitted: Cell<u64>,
}

/// The VU's side of an impaired link.
pub(crate) struct ImpairedLink {
    outgoing: mpsc::UnboundedSender<Vec<u8>>,
    incoming: mpsc::UnboundedReceiver<io::Result<Vec<u8>>>,
    pub wire: Rc<WireCounts>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ImpairedLink {
    fn drop(&mut self) {
        // Datagrams still held are dropped with the link, as a closed socket's would be.
        self.task.abort();
    }
}

impl ImpairedLink {
    /// Starts the task that owns `socket` (connected to the target) on the worker's `LocalSet`.
    pub fn start(socket: UdpSocket, network: Network, seed: u64) -> io::Result<Self> {
        let (outgoing, outgoing_rx) = mpsc::unbounded_channel();
        let (incoming_tx, incoming) = mpsc::unbounded_channel();
        let wire = Rc::new(WireCounts::default());
        let impairment = Impairment::new(network, seed);
        let link = Link { socket, timer: FineTimer::shared()?, incoming: incoming_tx, wire: Rc::clone(&wire) };
        let task = tokio::task::spawn_local(pump(link, impairment, outgoing_rx));
        Ok(Self { outgoing, incoming, wire, task })
    }

    pub fn send(&self, datagram: Vec<u8>) -> io::Result<()> {
        self.outgoing
            .send(datagram)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the impaired link's task ended"))
    }

    /// The next datagram delivered through the impairment (cancel safe).
    pub async fn recv(&mut self) -> io::Result<Vec<u8>> {
        match self.incoming.recv().await {
            Some(result) => result,
            None => Err(io::Error::new(io::ErrorKind::BrokenPipe, "the impaired link's task ended")),
        }
    }
}

/// The longest a datagram waits for the rate limit's link before it is dropped.
pub(crate) const QUEUE_WAIT: Duration = Duration::from_millis(100);

/// The draws (`horde_link::Impairment`, which the link's relay uses too) and the order of the
/// datagrams held.
pub(crate) struct Impairment {
    draws: horde_link::Impairment,
    /// Datagrams held so far: orders those due at the same instant first in, first out.
    order: u64,
    /// The rate limit's link, out and in.
    bottlenecks: Option<[Bottleneck; 2]>,
}

impl Impairment {
    /// `seed`: the VU's number, so that each VU draws its own stream.
    pub fn new(network: Network, seed: u64) -> Self {
        let bottlenecks = network
            .rate_limit
            .map(|rate| [Bottleneck::new(rate.bytes_per_s, QUEUE_WAIT), Bottleneck::new(rate.bytes_per_s, QUEUE_WAIT)]);
        Self { draws: horde_link::Impairment::new(network, seed), order: 0, bottlenecks }
    }

    /// Puts the copies of `datagram` that get through (none, one or two) in `held`, each due
    /// after its wait for the rate limit's link and its own delay.
    pub fn hold(&mut self, held: &mut Held, way: Way, datagram: Vec<u8>) {
        let now = Instant::now();
        let delays = self.draws.delays();
        let copies = delays.len();
        let mut datagram = Some(datagram);
        for (index, delay) in delays.into_iter().enumerate() {
            let copy = if index + 1 == copies {
                datagram.take().unwrap_or_default()
            } else {
                datagram.clone().unwrap_or_default()
            };
            let wait = match self.bottlenecks.as_mut() {
                Some(bottlenecks) => match bottlenecks[way as usize].admit(now.into_std(), copy.len()) {
                    Some(wait) => wait,
                    None => continue,
                },
                None => Duration::ZERO,
            };
            self.order += 1;
            held.push(Reverse((now + wait + delay, self.order, way, copy)));
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Way {
    Out = 0,
    In = 1,
}

/// Datagrams held back, soonest first: (due, order of scheduling, way, datagram); the order
/// keeps datagrams due at the same instant first in, first out.
pub(crate) type Held = BinaryHeap<Reverse<(Instant, u64, Way, Vec<u8>)>>;

/// What the task of an impaired link works with: its socket, the thread's fine timer, the VU's
/// channel of what came, the wire's counts.
struct Link {
    socket: UdpSocket,
    timer: Rc<FineTimer>,
    incoming: mpsc::UnboundedSender<io::Result<Vec<u8>>>,
    wire: Rc<WireCounts>,
}

async fn pump(link: Link, mut impairment: Impairment, mut outgoing: mpsc::UnboundedReceiver<Vec<u8>>) {
    let Link { socket, timer, incoming, wire } = link;
    let mut queue: Held = BinaryHeap::new();
    loop {
        let next_due = queue.peek().map(|Reverse((due, ..))| *due);
        tokio::select! {
            biased;
            // The thread's fine timer, not tokio's: tokio's rounds each deadline up to its next
            // millisecond tick, a millisecond each way on average (`fine_timer.rs`). A datagram
            // of no delay is due at once and goes on this loop's next turn.
            () = timer.sleep_until(next_due.unwrap_or_else(Instant::now)), if next_due.is_some() => {
                let now = Instant::now();
                while queue.peek().is_some_and(|Reverse((due, ..))| *due <= now) {
                    let Some(Reverse((_, _, way, datagram))) = queue.pop() else { break };
                    match way {
                        Way::Out => match socket.send(&datagram).await {
                            Ok(_) => wire.sent.set(wire.sent.get() + 1),
                            // The target's port is closed (an ICMP port unreachable came back
                            // for an earlier datagram): the VU is told, as a receive would be.
                            Err(error) if error.kind() == io::ErrorKind::ConnectionRefused => {
                                if incoming.send(Err(error)).is_err() {
                                    return;
                                }
                            }
                            Err(_) => {}
                        },
                        Way::In => {
                            if incoming.send(Ok(datagram)).is_err() {
                                return;
                            }
                        }
                    }
                }
            }
            datagram = outgoing.recv() => match datagram {
                Some(datagram) => impairment.hold(&mut queue, Way::Out, datagram),
                None => return,
            },
            received = super::datagram::recv_datagram(&socket) => match received {
                Ok(datagram) => {
                    wire.received.set(wire.received.get() + 1);
                    impairment.hold(&mut queue, Way::In, datagram);
                }
                Err(error) => {
                    if incoming.send(Err(error)).is_err() {
                        return;
                    }
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn network(loss_percent: f64, duplicate_percent: f64) -> Network {
        Network {
            delay_ms: 20.0,
            jitter_ms: 5.0,
            loss_percent,
            duplicate_percent,
            reorder_percent: 0.0,
            rate_limit: None,
            seed: 7,
        }
    }

    #[test]
    fn the_rate_limit_leaves_the_random_draws_as_they_were() {
        let limited = Network { rate_limit: Some(horde_plan::RateLimit { bytes_per_s: 1000.0 }), ..network(10.0, 5.0) };
        let mut plain = Impairment::new(network(10.0, 5.0), 3);
        let mut with_rate = Impairment::new(limited, 3);
        let (mut plain_held, mut rate_held) = (BinaryHeap::new(), BinaryHeap::new());
        for _ in 0..100 {
            plain.hold(&mut plain_held, Way::Out, vec![0; 100]);
            with_rate.hold(&mut rate_held, Way::Out, vec![0; 100]);
        }
        assert_eq!(
            (0..100).map(|_| plain.draws.delays()).collect::<Vec<_>>(),
            (0..100).map(|_| with_rate.draws.delays()).collect::<Vec<_>>()
        );
        assert!(rate_held.len() < plain_held.len(), "the link drops what its queue cannot hold");
    }
}
