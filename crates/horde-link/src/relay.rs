//! The relay: one thread moves IP packets between the link's two TUN devices, each way through
//! its own [`Impairment`] (its own random stream, so one way's draws never depend on the other's
//! timing). Packets held back wait on one heap by due time, not on a timer each; the thread
//! sleeps in `ppoll` until the next one is due or a device has a packet, and wakes at once when
//! asked to stop (an eventfd).
#![allow(unsafe_code)]

use crate::bottleneck::Bottleneck;
use crate::impairment::Impairment;
use crate::tun::Tun;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The largest packet a device hands over (an IPv4 or IPv6 packet without GSO is at most 64 KiB).
const MAX_PACKET: usize = 65_536;
/// Packets read from one device before the relay looks at the other and at the heap.
const BURST: usize = 64;
/// Buffers kept for reuse once their packet has gone out.
const SPARE_BUFFERS: usize = 4096;

/// Which way a packet goes: out (from the outer device, the generator's side, to the inner one)
/// or back in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Way {
    Out = 0,
    Back = 1,
}

/// The link's rate limit each way (`--rate-mbit`, `--queue-ms`): a [`Bottleneck`] of
/// `bits_per_s` whose drop-tail queue holds at most `queue` of waiting; the delay comes after.
/// Lost packets (the draws) never take the wire.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shaping {
    pub bits_per_s: f64,
    pub queue: Duration,
}

impl Shaping {
    fn bottleneck(&self) -> Bottleneck {
        Bottleneck::new(self.bits_per_s / 8.0, self.queue)
    }
}

/// What the relay has done, each way (index [`Way`]), counted as it goes.
#[derive(Debug, Default)]
pub struct Counters {
    pub read: [AtomicU64; 2],
    pub bytes: [AtomicU64; 2],
    pub dropped: [AtomicU64; 2],
    /// Dropped by a full queue (the [`Bottleneck`]), not by the draws.
    pub overflowed: [AtomicU64; 2],
    pub duplicated: [AtomicU64; 2],
    pub delivered: [AtomicU64; 2],
    /// Writes a device refused (its namespace's stack, e.g. out of memory): lost.
    pub write_errors: [AtomicU64; 2],
    /// The relay thread's own CPU time so far, in nanoseconds.
    pub cpu_ns: AtomicU64,
}

fn add(counter: &AtomicU64, value: u64) {
    counter.fetch_add(value, Ordering::Relaxed);
}

/// A wake-up the relay waits on beside its devices.
#[derive(Debug)]
pub(crate) struct Stop(OwnedFd);

impl Stop {
    pub fn new() -> io::Result<Self> {
        // SAFETY: eventfd returns a fresh descriptor (or -1) that nothing else owns.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is ours alone.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(raw) }))
    }

    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of a u64 we own to our eventfd.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
}

type Held = BinaryHeap<Reverse<(Instant, u64, Way, Vec<u8>)>>;

/// Runs until `stop` is signalled (or a device fails).
pub(crate) fn run(
    devices: [Tun; 2],
    mut impairments: [Impairment; 2],
    shaping: Option<Shaping>,
    stop: Arc<Stop>,
    counters: Arc<Counters>,
) -> io::Result<()> {
    let transparent = shaping.is_none() && impairments.iter().all(Impairment::is_transparent);
    let mut bottlenecks = shaping.map(|shaping| [shaping.bottleneck(), shaping.bottleneck()]);
    let mut held: Held = BinaryHeap::new();
    let mut order = 0u64;
    let mut scratch = vec![0u8; MAX_PACKET];
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let mut polls = [
        libc::pollfd { fd: devices[0].as_raw_fd(), events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: devices[1].as_raw_fd(), events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: stop.0.as_raw_fd(), events: libc::POLLIN, revents: 0 },
    ];
    let mut rounds = 0u32;
    loop {
        let timeout = held.peek().map(|Reverse((due, ..))| due.saturating_duration_since(Instant::now()));
        let timespec = timeout
            .map(|wait| libc::timespec { tv_sec: wait.as_secs() as libc::time_t, tv_nsec: wait.subsec_nanos() as _ });
        let timespec_ptr = timespec.as_ref().map_or(std::ptr::null(), |spec| spec as *const libc::timespec);
        // SAFETY: ppoll reads our three pollfds and the optional timespec, and writes revents.
        let ready =
            unsafe { libc::ppoll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, timespec_ptr, std::ptr::null()) };
        if ready < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        if polls[2].revents != 0 {
            return Ok(());
        }
        for (index, way) in [(0, Way::Out), (1, Way::Back)] {
            if polls[index].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                return Err(io::Error::other(format!("the link's device {} failed", devices[index].name())));
            }
            if polls[index].revents & libc::POLLIN == 0 {
                continue;
            }
            let to = &devices[1 - index];
            for _ in 0..BURST {
                let length = match devices[index].read(&mut scratch) {
                    Ok(length) => length,
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Err(error) => return Err(error),
                };
                let packet = &scratch[..length];
                add(&counters.read[way as usize], 1);
                add(&counters.bytes[way as usize], length as u64);
                if transparent {
                    deliver(to, packet, way, &counters);
                    continue;
                }
                let delays = impairments[way as usize].delays();
                match delays.len() {
                    0 => add(&counters.dropped[way as usize], 1),
                    2 => add(&counters.duplicated[way as usize], 1),
                    _ => {}
                }
                let mut now = Instant::now();
                if let (Some(bottlenecks), false) = (bottlenecks.as_mut(), delays.is_empty()) {
                    let Some(wait) = bottlenecks[way as usize].admit(now, length) else {
                        add(&counters.overflowed[way as usize], 1);
                        continue;
                    };
                    // Off the wire: the delay runs from there.
                    now += wait;
                }
                for delay in delays {
                    if delay.is_zero() && bottlenecks.is_none() && held.is_empty() {
                        deliver(to, packet, way, &counters);
                        continue;
                    }
                    let mut buffer = spare.pop().unwrap_or_default();
                    buffer.clear();
                    buffer.extend_from_slice(packet);
                    order += 1;
                    held.push(Reverse((now + delay, order, way, buffer)));
                }
            }
        }
        let now = Instant::now();
        while held.peek().is_some_and(|Reverse((due, ..))| *due <= now) {
            let Some(Reverse((_, _, way, buffer))) = held.pop() else { break };
            deliver(&devices[1 - way as usize], &buffer, way, &counters);
            if spare.len() < SPARE_BUFFERS {
                spare.push(buffer);
            }
        }
        rounds = rounds.wrapping_add(1);
        if rounds & 0xFF == 0 {
            counters.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
        }
    }
}

fn deliver(to: &Tun, packet: &[u8], way: Way, counters: &Counters) {
    match to.write(packet) {
        Ok(_) => add(&counters.delivered[way as usize], 1),
        Err(_) => add(&counters.write_errors[way as usize], 1),
    }
}

/// The calling thread's CPU time, in nanoseconds.
pub(crate) fn thread_cpu_ns() -> u64 {
    // SAFETY: clock_gettime writes into a timespec we own.
    unsafe {
        let mut spec: libc::timespec = std::mem::zeroed();
        if libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut spec) != 0 {
            return 0;
        }
        Duration::new(spec.tv_sec as u64, spec.tv_nsec as u32).as_nanos() as u64
    }
}
