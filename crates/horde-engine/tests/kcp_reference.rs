//! The engine's KCP (a Rust port of ikcp.c) against the reference C implementation, ikcp.c
//! itself (built by the `kcp-rs` crate): a small gateway on ikcp answers `ping N` with `pong N`,
//! and the engine's pings must all come back, with the reference's defaults on both sides and
//! in the fast mode game clients run, on a clean link and with 10 % of datagrams lost each way.

mod support;

use kcp_reference::Kcp;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use support::{closed_value, run_to_end, scenario_plan, step_ok, step_requests};

/// ikcp_nodelay's knobs: (nodelay, interval ms, resend, no congestion window).
type NoDelay = (bool, u32, u32, bool);

/// A gateway on the reference ikcp.c: one session per peer, `ping REST` answered `pong REST`.
struct ReferenceGateway {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl ReferenceGateway {
    fn start(nodelay: Option<NoDelay>) -> Self {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
        socket.set_read_timeout(Some(Duration::from_millis(1))).expect("timeout");
        let addr = socket.local_addr().expect("address");
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicU64::new(0));
        let (stopped, count) = (Arc::clone(&stop), Arc::clone(&answered));
        let thread = std::thread::spawn(move || {
            // Boxed: ikcp keeps a pointer to its wrapper (its output callback's `user`).
            let mut sessions: HashMap<SocketAddr, Box<Kcp>> = HashMap::new();
            let mut packet = [0u8; 2048];
            let mut message = vec![0u8; 65536];
            while !stopped.load(Ordering::Relaxed) {
                if let Ok((len, peer)) = socket.recv_from(&mut packet) {
                    if let Some(conv) = Kcp::read_conv(&packet[..len]) {
                        let session = sessions.entry(peer).or_insert_with(|| {
                            let mut kcp = Box::new(Kcp::new(conv));
                            kcp.initialize();
                            if let Some((nodelay, interval, resend, nc)) = nodelay {
                                kcp.set_nodelay(nodelay, interval, resend, nc);
                            }
                            kcp
                        });
                        let _ = session.input(&packet[..len]);
                    }
                }
                for (peer, session) in sessions.iter_mut() {
                    while let Ok(size) = session.recv(&mut message) {
                        if size == 0 {
                            break;
                        }
                        if let Some(rest) = message[..size].strip_prefix(b"ping") {
                            let reply = [b"pong".as_slice(), rest].concat();
                            session.send(&reply).expect("send");
                            count.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    let now = session.get_system_time();
                    session.update(now);
                    while let Some(datagram) = session.pop_output() {
                        let _ = socket.send_to(&datagram, peer);
                    }
                }
            }
        });
        Self { addr, stop, answered, thread: Some(thread) }
    }
}

impl Drop for ReferenceGateway {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn ping_plan(
    gateway: &ReferenceGateway,
    kcp: Option<horde_plan::KcpOptions>,
    network: Value,
    seconds: f64,
) -> horde_plan::Plan {
    let steps = json!([{"type": "ping", "name": "rtt", "text": "ping {{ seq }}", "reply_seq": "pong (\\d+)", "timeout_ms": 5000.0,
                        "think_time": {"type": "constant", "duration_ms": 20.0}}]);
    let mut plan = scenario_plan(
        &format!("kcp://{}", gateway.addr),
        json!({"steps": steps, "workload": closed_value(2, seconds), "network": network}),
    );
    plan.target.kcp = kcp;
    plan
}

fn every_ping_answered(plan: &horde_plan::Plan, gateway: &ReferenceGateway, at_least: u64) {
    let snapshots = run_to_end(plan, 1);
    let pings = step_requests(&snapshots, "rtt");
    assert!(pings >= at_least, "only {pings} pings");
    assert_eq!(
        step_ok(&snapshots, "rtt"),
        pings,
        "every ping answered: {:?}",
        support::step_error_kinds(&snapshots, "rtt")
    );
    assert!(gateway.answered.load(Ordering::Relaxed) >= pings, "the reference answered each");
}

#[test]
fn the_engines_kcp_defaults_are_the_reference_implementations() {
    // What ikcp_create sets (ikcp.c: IKCP_INTERVAL 100, IKCP_WND_SND 32, IKCP_WND_RCV 128,
    // IKCP_MTU_DEF 1400, no nodelay, no fast resend, the congestion window on).
    let ours = horde_plan::KcpOptions::default();
    assert_eq!((ours.nodelay, ours.interval_ms, ours.resend, ours.no_congestion_window), (false, 100, 0, false));
    assert_eq!((ours.send_window, ours.receive_window, ours.mtu), (32, 128, 1400));
}

#[test]
fn pings_over_kcp_are_answered_by_the_reference_implementation_with_its_defaults() {
    // Both sides on ikcp's defaults: an ACK waits for the next 100 ms flush, so pings are slow.
    let gateway = ReferenceGateway::start(None);
    every_ping_answered(&ping_plan(&gateway, None, Value::Null, 1.5), &gateway, 6);
}

#[test]
fn pings_over_kcp_are_answered_by_the_reference_implementation_in_fast_mode_under_loss() {
    let fast = horde_plan::KcpOptions {
        nodelay: true,
        interval_ms: 10,
        resend: 2,
        no_congestion_window: true,
        ..Default::default()
    };
    let gateway = ReferenceGateway::start(Some((true, 10, 2, true)));
    every_ping_answered(&ping_plan(&gateway, Some(fast), Value::Null, 1.0), &gateway, 40);
    // 10 % of the engine's datagrams lost each way: the two implementations' resends interoperate.
    let lossy = ReferenceGateway::start(Some((true, 10, 2, true)));
    every_ping_answered(&ping_plan(&lossy, Some(fast), json!({"loss_percent": 10.0, "seed": 5}), 2.0), &lossy, 40);
}
