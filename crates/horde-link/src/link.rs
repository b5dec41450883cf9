//! A link: a network namespace of its own, a TUN device on each side, point-to-point addresses
//! from a free /30 of 10.77.0.0/16, and the relay thread between the devices. Built with the
//! `ip` command of iproute2 (the namespace is a named one, `ip netns`, so that commands can be
//! started in it with `ip netns exec`); torn down when dropped or stopped: the relay stops, the
//! devices close (and so vanish), what still runs in the namespace is killed and the namespace
//! deleted. A namespace a killed link left behind (named after a process that is gone) is
//! deleted by the next link that starts.
#![allow(unsafe_code)]

use crate::impairment::Impairment;
use crate::relay::{self, Counters, Shaping, Stop, Way};
use crate::tun::Tun;
use horde_plan::Network;
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Where `ip netns` keeps its namespaces.
const NETNS_DIR: &str = "/run/netns";
/// Every link's namespace is named `horde-link-PID-N`.
pub const NAMESPACE_PREFIX: &str = "horde-link-";

/// Each device's transmit queue, in packets.
const TX_QUEUE: &str = "16384";

static LINKS: AtomicU32 = AtomicU32::new(0);

#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// Not allowed: the link needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN for the namespace).
    #[error("{0}")]
    NotPermitted(String),
    /// Something the link needs is missing (`/dev/net/tun`, the `ip` command).
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Io(String),
}

fn failed(what: &str, error: io::Error) -> LinkError {
    let message = format!("{what}: {error}");
    match error.kind() {
        io::ErrorKind::PermissionDenied => LinkError::NotPermitted(message),
        io::ErrorKind::NotFound => LinkError::Unavailable(message),
        _ if error.raw_os_error() == Some(libc::EPERM) => LinkError::NotPermitted(message),
        _ => LinkError::Io(message),
    }
}

/// The figures of a link so far, each way: out (the generator's packets towards the namespace)
/// and back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
    pub dropped: [u64; 2],
    /// Dropped by the bottleneck's full queue.
    pub overflowed: [u64; 2],
    pub duplicated: [u64; 2],
    pub delivered: [u64; 2],
    pub write_errors: [u64; 2],
    /// The relay thread's CPU time, nanoseconds.
    pub cpu_ns: u64,
}

/// A running link. Dropping it tears everything down.
#[derive(Debug)]
pub struct Link {
    namespace: String,
    outside_device: String,
    inside_device: String,
    outside_address: Ipv4Addr,
    inside_address: Ipv4Addr,
    stop: Arc<Stop>,
    counters: Arc<Counters>,
    relay: Option<JoinHandle<io::Result<()>>>,
    namespace_made: bool,
}

impl Link {
    /// Builds the link and starts its relay: `network` each way (the same delay, loss... out and
    /// back; each way its own draws from `network.seed`), behind a bottleneck when `shaping`
    /// says so.
    pub fn start(network: Network, shaping: Option<Shaping>) -> Result<Self, LinkError> {
        if let Some(shaping) = shaping {
            if !(shaping.bits_per_s.is_finite() && shaping.bits_per_s > 0.0) {
                return Err(LinkError::Io(format!("a rate of {} bits/s cannot carry a packet", shaping.bits_per_s)));
            }
        }
        remove_stale_namespaces();
        let pid = std::process::id();
        let number = LINKS.fetch_add(1, Ordering::Relaxed);
        let namespace = format!("{NAMESPACE_PREFIX}{pid}-{number}");
        // Held until the block's addresses are on the devices: two links starting at once (in
        // this process or another) never take the same block.
        let lock = BlockLock::take()?;
        let (outside_address, inside_address) = free_block()?;
        let mut link = Self {
            outside_device: format!("hl{pid}-{number}o"),
            inside_device: format!("hl{pid}-{number}i"),
            namespace,
            outside_address,
            inside_address,
            stop: Arc::new(Stop::new().map_err(|error| failed("eventfd", error))?),
            counters: Arc::new(Counters::default()),
            relay: None,
            namespace_made: false,
        };
        link.build(network, shaping)?;
        drop(lock);
        Ok(link)
    }

    fn build(&mut self, network: Network, shaping: Option<Shaping>) -> Result<(), LinkError> {
        let outside = Tun::open(&self.outside_device)
            .map_err(|error| failed("cannot create a TUN device (/dev/net/tun)", error))?;
        ip(&["netns", "add", &self.namespace])?;
        self.namespace_made = true;
        let inside = Tun::open_in(&self.namespace_path(), &self.inside_device)
            .map_err(|error| failed("cannot create the TUN device inside the namespace", error))?;
        let (outer, inner) = (self.outside_address.to_string(), self.inside_address.to_string());
        ip(&["addr", "add", &outer, "peer", &inner, "dev", &self.outside_device])?;
        // A queue long enough for a burst of thousands of VUs' packets at once (the TUN
        // default, 500, drops the rest before the relay sees them).
        // No IPv6 link-local address: the link carries IPv4 only, and nothing of its own (no
        // router solicitations), so that its counts are the traffic's.
        ip(&["link", "set", "dev", &self.outside_device, "addrgenmode", "none"])?;
        ip(&["link", "set", "dev", &self.outside_device, "txqueuelen", TX_QUEUE, "up"])?;
        let namespace = self.namespace.clone();
        let within = |args: &[&str]| ip(&[&["-n", namespace.as_str()], args].concat());
        within(&["link", "set", "dev", "lo", "up"])?;
        within(&["addr", "add", &inner, "peer", &outer, "dev", &self.inside_device])?;
        within(&["link", "set", "dev", &self.inside_device, "addrgenmode", "none"])?;
        within(&["link", "set", "dev", &self.inside_device, "txqueuelen", TX_QUEUE, "up"])?;
        // The namespace reaches the rest of the machine through the link too.
        within(&["route", "add", "default", "dev", &self.inside_device])?;
        let impairments = [Impairment::new(network, Way::Out as u64), Impairment::new(network, Way::Back as u64)];
        let (stop, counters) = (Arc::clone(&self.stop), Arc::clone(&self.counters));
        let relay = std::thread::Builder::new()
            .name("horde-link".into())
            .spawn(move || {
                let result = relay::run([outside, inside], impairments, shaping, stop, Arc::clone(&counters));
                counters.cpu_ns.store(relay::thread_cpu_ns(), Ordering::Relaxed);
                result
            })
            .map_err(|error| failed("cannot start the relay thread", error))?;
        self.relay = Some(relay);
        Ok(())
    }

    /// `ip netns` name of the namespace (`ip netns exec NAME COMMAND` runs a command in it).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn namespace_path(&self) -> PathBuf {
        Path::new(NETNS_DIR).join(&self.namespace)
    }

    pub fn outside_device(&self) -> &str {
        &self.outside_device
    }

    pub fn inside_device(&self) -> &str {
        &self.inside_device
    }

    /// This side's address (the generator's source address towards the namespace).
    pub fn outside_address(&self) -> Ipv4Addr {
        self.outside_address
    }

    /// The namespace's address: what the generator targets.
    pub fn inside_address(&self) -> Ipv4Addr {
        self.inside_address
    }

    pub fn stats(&self) -> LinkStats {
        let load = |counters: &[std::sync::atomic::AtomicU64; 2]| {
            counters.each_ref().map(|counter| counter.load(Ordering::Relaxed))
        };
        let counters = &self.counters;
        LinkStats {
            packets: load(&counters.read),
            bytes: load(&counters.bytes),
            dropped: load(&counters.dropped),
            overflowed: load(&counters.overflowed),
            duplicated: load(&counters.duplicated),
            delivered: load(&counters.delivered),
            write_errors: load(&counters.write_errors),
            cpu_ns: counters.cpu_ns.load(Ordering::Relaxed),
        }
    }

    /// Whether the relay still runs (it stops only when asked, or when a device fails).
    pub fn is_running(&self) -> bool {
        self.relay.as_ref().is_some_and(|relay| !relay.is_finished())
    }

    /// Tears the link down (what dropping it does), and says how the relay ended.
    pub fn stop(mut self) -> Result<LinkStats, LinkError> {
        let ended = self.tear_down();
        let stats = self.stats();
        ended.map(|()| stats)
    }

    fn tear_down(&mut self) -> Result<(), LinkError> {
        let mut ended = Ok(());
        if let Some(relay) = self.relay.take() {
            self.stop.signal();
            ended = match relay.join() {
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => Err(failed("the link's relay failed", error)),
                Err(_) => Err(LinkError::Io("the link's relay panicked".into())),
            };
        }
        if self.namespace_made {
            self.namespace_made = false;
            delete_namespace(&self.namespace);
        }
        ended
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = self.tear_down();
    }
}

/// Runs `ip ARGS...`; its stderr is the error.
fn ip(args: &[&str]) -> Result<(), LinkError> {
    let output = Command::new("ip").args(args).output().map_err(|error| match error.kind() {
        io::ErrorKind::NotFound => LinkError::Unavailable("the `ip` command (iproute2) is not installed".into()),
        _ => failed("cannot run `ip`", error),
    })?;
    if output.status.success() {
        return Ok(());
    }
    let message = format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr).trim());
    Err(if message.contains("Operation not permitted") || message.contains("Permission denied") {
        LinkError::NotPermitted(message)
    } else {
        LinkError::Io(message)
    })
}

/// Kills what still runs in the namespace, then deletes it.
fn delete_namespace(namespace: &str) {
    if let Ok(output) = Command::new("ip").args(["netns", "pids", namespace]).output() {
        for pid in
            String::from_utf8_lossy(&output.stdout).split_whitespace().filter_map(|pid| pid.parse::<libc::pid_t>().ok())
        {
            // SAFETY: kill only sends a signal to a process of our own namespace.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    let _ = ip(&["netns", "delete", namespace]);
}

/// Namespaces `horde-link-PID-N` whose process is gone (a link killed with SIGKILL).
fn remove_stale_namespaces() {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(NAMESPACE_PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            delete_namespace(&name);
        }
    }
}

/// An exclusive lock (flock) on `/run/horde-link.lock` while a link picks its block.
struct BlockLock {
    _held: std::fs::File,
}

impl BlockLock {
    fn take() -> Result<Self, LinkError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open("/run/horde-link.lock")
            .map_err(|error| failed("cannot open /run/horde-link.lock", error))?;
        // SAFETY: flock on a descriptor the File owns; released when it closes.
        if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX) } != 0 {
            return Err(failed("cannot lock /run/horde-link.lock", io::Error::last_os_error()));
        }
        Ok(Self { _held: file })
    }
}

/// The first /30 of 10.77.0.0/16 none of whose addresses this namespace has: (.1, .2).
fn free_block() -> Result<(Ipv4Addr, Ipv4Addr), LinkError> {
    let used = local_addresses();
    (0u32..16_384)
        .map(|block| u32::from(Ipv4Addr::new(10, 77, 0, 0)) + block * 4)
        .find(|base| !used.iter().any(|address| (base..&(base + 4)).contains(&address)))
        .map(|base| (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2)))
        .ok_or_else(|| LinkError::Io("no free /30 left in 10.77.0.0/16".into()))
}

/// This namespace's IPv4 addresses, and those of its point-to-point peers.
fn local_addresses() -> Vec<u32> {
    let mut found = Vec::new();
    // SAFETY: getifaddrs allocates a list we only read and then free with freeifaddrs.
    unsafe {
        let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
        if libc::getifaddrs(&mut list) != 0 {
            return found;
        }
        let mut entry = list;
        while !entry.is_null() {
            for address in [(*entry).ifa_addr, (*entry).ifa_ifu] {
                if !address.is_null() && i32::from((*address).sa_family) == libc::AF_INET {
                    let address = &*(address as *const libc::sockaddr_in);
                    found.push(u32::from_be(address.sin_addr.s_addr));
                }
            }
            entry = (*entry).ifa_next;
        }
        libc::freeifaddrs(list);
    }
    found
}
