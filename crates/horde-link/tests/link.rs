//! Known answers of the link, as root (the namespace and the TUN devices need it; where no link
//! can be built each test says why it did nothing and passes, unless `HORDE_REQUIRE_LINK=1`):
//! TCP through it with no impairment, with 20 ms each way, with 10 % loss each way (the kernel
//! retransmits), behind a bottleneck, and nothing left behind.
#![allow(unsafe_code)]

use horde_link::{Link, LinkError, Shaping, NAMESPACE_PREFIX};
use horde_plan::Network;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The link, or None (the test skipped, saying why) where none can be built here.
fn start(network: Network, shaping: Option<Shaping>) -> Option<Link> {
    // SAFETY: geteuid only reads the process's credentials.
    let why = if unsafe { libc::geteuid() } != 0 {
        "not root".to_owned()
    } else {
        match Link::start(network, shaping) {
            Ok(link) => return Some(link),
            Err(error @ (LinkError::NotPermitted(_) | LinkError::Unavailable(_))) => error.to_string(),
            Err(error) => panic!("the link did not start: {error}"),
        }
    };
    assert!(std::env::var("HORDE_REQUIRE_LINK").as_deref() != Ok("1"), "HORDE_REQUIRE_LINK=1 but no link here: {why}");
    eprintln!("skipped: the link needs root (CAP_NET_ADMIN) for its namespace and TUN devices: {why}");
    None
}

fn network(delay_ms: f64, loss_percent: f64) -> Network {
    Network {
        delay_ms,
        jitter_ms: 0.0,
        loss_percent,
        duplicate_percent: 0.0,
        reorder_percent: 0.0,
        rate_limit: None,
        seed: 3,
    }
}

/// A line echo server listening inside the link's namespace; returns its address.
fn echo_inside(link: &Link) -> SocketAddr {
    let namespace = File::open(link.namespace_path()).expect("namespace file");
    let address = SocketAddr::new(link.inside_address().into(), 0);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: setns changes only this thread's network namespace.
        assert_eq!(unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
        let listener = TcpListener::bind(address).expect("bind inside");
        ready_tx.send(listener.local_addr().expect("address")).expect("send");
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                stream.set_nodelay(true).ok();
                let mut writer = stream.try_clone().expect("clone");
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if writeln!(writer, "{line}").is_err() {
                        break;
                    }
                }
            });
        }
    });
    ready_rx.recv_timeout(Duration::from_secs(5)).expect("the echo server started")
}

/// Round-trip times of `count` lines sent one at a time, `gap` apart.
fn pings(address: SocketAddr, count: usize, gap: Duration) -> Vec<Duration> {
    let stream = TcpStream::connect_timeout(&address, Duration::from_secs(5)).expect("connect through the link");
    stream.set_nodelay(true).ok();
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    let mut times = Vec::with_capacity(count);
    for number in 0..count {
        let started = Instant::now();
        writeln!(writer, "ping {number}").expect("send");
        let mut line = String::new();
        reader.read_line(&mut line).expect("every ping is answered");
        assert_eq!(line.trim(), format!("ping {number}"));
        times.push(started.elapsed());
        std::thread::sleep(gap);
    }
    times.sort();
    times
}

fn percentile(sorted: &[Duration], share: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * share).round() as usize]
}

fn left_behind(link_namespace: &str, devices: [&str; 2]) -> Vec<String> {
    let mut found = Vec::new();
    if std::path::Path::new("/run/netns").join(link_namespace).exists() {
        found.push(link_namespace.to_owned());
    }
    let links = std::process::Command::new("ip").args(["-o", "link", "show"]).output().expect("ip link");
    let links = String::from_utf8_lossy(&links.stdout);
    found.extend(
        devices.iter().filter(|device| links.contains(&format!(" {device}:"))).map(|device| device.to_string()),
    );
    found
}

#[test]
fn tcp_through_a_plain_link_is_answered_and_nothing_is_left_behind() {
    let Some(link) = start(network(0.0, 0.0), None) else { return };
    assert!(link.namespace().starts_with(NAMESPACE_PREFIX));
    let (namespace, devices) =
        (link.namespace().to_owned(), [link.outside_device().to_owned(), link.inside_device().to_owned()]);
    let times = pings(echo_inside(&link), 50, Duration::ZERO);
    assert!(percentile(&times, 0.5) < Duration::from_millis(5), "{times:?}");
    let stats = link.stop().expect("the relay ran to its stop");
    assert!(stats.packets[0] >= 50 && stats.packets[1] >= 50, "{stats:?}");
    assert_eq!((stats.dropped, stats.write_errors), ([0, 0], [0, 0]), "{stats:?}");
    // The other tests of this binary run `ip` at the same time: a child between its fork and
    // its exec holds a copy of every descriptor, the TUN's too, so a device can outlive its
    // close by that moment. Left behind is what is still there a while later.
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut found = left_behind(&namespace, [&devices[0], &devices[1]]);
    while !found.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        found = left_behind(&namespace, [&devices[0], &devices[1]]);
    }
    assert_eq!(found, Vec::<String>::new());
}

#[test]
fn twenty_ms_each_way_is_forty_ms_round_trip() {
    let Some(link) = start(network(20.0, 0.0), None) else { return };
    let times = pings(echo_inside(&link), 30, Duration::from_millis(5));
    let median = percentile(&times, 0.5);
    assert!((Duration::from_millis(40)..Duration::from_millis(46)).contains(&median), "median {median:?}");
}

#[test]
fn under_loss_tcp_delivers_everything_late() {
    let Some(link) = start(network(5.0, 10.0), None) else { return };
    let times = pings(echo_inside(&link), 150, Duration::from_millis(2));
    // Every line came back (pings asserts it); the losses show as retransmission timeouts
    // (at least Linux's 200 ms minimum) in the tail.
    assert!(percentile(&times, 0.5) < Duration::from_millis(30), "{times:?}");
    assert!(percentile(&times, 0.99) >= Duration::from_millis(200), "p99 {:?}", percentile(&times, 0.99));
    let stats = link.stats();
    assert!(stats.dropped[0] > 0 && stats.dropped[1] > 0, "{stats:?}");
}

#[test]
fn a_bottleneck_carries_its_rate_and_no_more() {
    // 4 Mbit/s each way: 512 KiB take about 1.05 s (payload over packets of 1500 bytes: 97 %).
    let shaping = Shaping { bits_per_s: 4e6, queue: Duration::from_millis(500) };
    let Some(link) = start(network(1.0, 0.0), Some(shaping)) else { return };
    let namespace = File::open(link.namespace_path()).expect("namespace file");
    let address = SocketAddr::new(link.inside_address().into(), 0);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    const BYTES: usize = 512 * 1024;
    std::thread::spawn(move || {
        // SAFETY: setns changes only this thread's network namespace.
        assert_eq!(unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
        let listener = TcpListener::bind(address).expect("bind inside");
        ready_tx.send(listener.local_addr().expect("address")).expect("send");
        let (mut stream, _) = listener.accept().expect("accept");
        let mut buffer = vec![0u8; BYTES];
        stream.read_exact(&mut buffer).expect("every byte arrives");
        stream.write_all(b"done").expect("answer");
    });
    let address = ready_rx.recv_timeout(Duration::from_secs(5)).expect("the sink started");
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5)).expect("connect");
    let started = Instant::now();
    stream.write_all(&vec![7u8; BYTES]).expect("send");
    let mut done = [0u8; 4];
    stream.read_exact(&mut done).expect("the sink answers");
    let elapsed = started.elapsed().as_secs_f64();
    let mbit_per_s = BYTES as f64 * 8.0 / elapsed / 1e6;
    eprintln!("{mbit_per_s:.2} Mbit/s in {elapsed:.2} s");
    assert!((3.2..=4.0).contains(&mbit_per_s), "{mbit_per_s:.2} Mbit/s in {elapsed:.2} s");
}
