//! HTTP/2's flow control, stream cap and GOAWAY with known answers: the SETTINGS and
//! WINDOW_UPDATE frames the client sends (read by a tap between it and the built-in target),
//! `target.http2.max_concurrent_streams` against a server that counts its streams in flight,
//! and a server that sends GOAWAY with a last stream id below streams still in flight.

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{
    assert_accounting, closed, connections_opened, custom_plan, error_kinds, get_step, run_timed, total_ok,
    total_requests,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const SETTINGS: u8 = 0x4;
const WINDOW_UPDATE: u8 = 0x8;
const HEADERS: u8 = 0x1;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime")
}

/// One HTTP/2 frame as read off the wire: its type, flags, stream and payload.
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// The frames in `bytes` (a client's side of a connection: the preface, then frames).
fn frames(bytes: &[u8]) -> Vec<Frame> {
    let mut rest = bytes.strip_prefix(PREFACE).expect("the client's preface");
    let mut found = Vec::new();
    while rest.len() >= 9 {
        let length = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        if rest.len() < 9 + length {
            break;
        }
        let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
        found.push(Frame { kind: rest[3], flags: rest[4], stream, payload: rest[9..9 + length].to_vec() });
        rest = &rest[9 + length..];
    }
    found
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = payload.len() as u32;
    let mut bytes = vec![(length >> 16) as u8, (length >> 8) as u8, length as u8, kind, flags];
    bytes.extend_from_slice(&stream.to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// A tap in front of `upstream`: everything passes both ways, and what each client sent is
/// kept, one buffer per connection.
fn tap(upstream: SocketAddr, runtime: &tokio::runtime::Runtime) -> (SocketAddr, Arc<Mutex<Vec<Vec<u8>>>>) {
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let address = listener.local_addr().expect("address");
    let sent = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&sent);
    runtime.spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else { continue };
            let Ok(server) = TcpStream::connect(upstream).await else { continue };
            let index = {
                let mut sent = kept.lock().unwrap();
                sent.push(Vec::new());
                sent.len() - 1
            };
            let kept = Arc::clone(&kept);
            let (mut client_read, mut client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
            });
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 64 * 1024];
                while let Ok(read) = client_read.read(&mut buffer).await {
                    if read == 0 || server_write.write_all(&buffer[..read]).await.is_err() {
                        break;
                    }
                    kept.lock().unwrap()[index].extend_from_slice(&buffer[..read]);
                }
            });
        }
    });
    (address, sent)
}

/// What the client said on its connections: its SETTINGS values (id, value), the increments of
/// its WINDOW_UPDATEs on the connection, and how many WINDOW_UPDATEs it sent for streams.
fn told(sent: &[Vec<u8>]) -> (Vec<(u16, u32)>, Vec<u32>, usize) {
    let (mut settings, mut connection_updates, mut stream_updates) = (Vec::new(), Vec::new(), 0);
    for connection in sent {
        for frame in frames(connection) {
            match frame.kind {
                SETTINGS if frame.flags & 1 == 0 => settings.extend(frame.payload.chunks(6).map(|pair| {
                    (u16::from_be_bytes([pair[0], pair[1]]), u32::from_be_bytes([pair[2], pair[3], pair[4], pair[5]]))
                })),
                WINDOW_UPDATE if frame.stream == 0 => {
                    connection_updates.push(u32::from_be_bytes(frame.payload[..4].try_into().unwrap()))
                }
                WINDOW_UPDATE => stream_updates += 1,
                _ => {}
            }
        }
    }
    (settings, connection_updates, stream_updates)
}

#[test]
fn the_windows_asked_for_are_advertised_and_a_large_response_still_arrives_through_a_small_one() {
    let target = horde_target::TargetHandle::start(horde_target::TargetConfig::default()).expect("target starts");
    let upstream: SocketAddr = target.base_url().trim_start_matches("http://").parse().expect("target address");
    let runtime = runtime();
    let (address, sent) = tap(upstream, &runtime);
    let run = |http2: &str| {
        sent.lock().unwrap().clear();
        let extra = format!(r#", "http_version": "2"{http2}"#);
        let plan =
            custom_plan(&format!("http://{address}"), &extra, &get_step("/bytes/200000", None), &closed(1, 1.0), 2.0);
        let (snapshots, _) = run_timed(&plan, 1);
        assert_accounting(&snapshots);
        assert!(error_kinds(&snapshots).is_empty(), "{http2}: {:?}", error_kinds(&snapshots));
        let ok = total_ok(&snapshots);
        let bytes: u64 = snapshots.iter().flat_map(|s| s.steps.iter()).map(|step| step.bytes_received).sum();
        assert!(ok > 0 && bytes >= ok * 200_000, "{http2}: {bytes} bytes for {ok} responses");
        std::thread::sleep(Duration::from_millis(100));
        let told = told(&sent.lock().unwrap());
        (ok, told)
    };
    // The defaults: 1 MiB per stream (SETTINGS_INITIAL_WINDOW_SIZE, id 4), 16 MiB for the
    // connection; a 200,000-byte body never needs a stream's WINDOW_UPDATE.
    let (_, (settings, connection_updates, stream_updates)) = run("");
    assert!(settings.contains(&(4, 1 << 20)), "{settings:?}");
    assert_eq!(connection_updates.first(), Some(&((16 << 20) - 65_535)), "{connection_updates:?}");
    assert_eq!(stream_updates, 0);
    // A window of 4,096 bytes: each response comes through about fifty WINDOW_UPDATEs.
    let (ok, (settings, connection_updates, stream_updates)) =
        run(r#", "http2": {"stream_window_bytes": 4096, "connection_window_bytes": 1048576}"#);
    assert!(settings.contains(&(4, 4096)), "{settings:?}");
    assert_eq!(connection_updates.first(), Some(&(1_048_576 - 65_535)), "{connection_updates:?}");
    assert!(stream_updates as u64 >= ok * 40, "{stream_updates} stream WINDOW_UPDATEs for {ok} responses");
}

/// An h2c server that answers every request after 20 ms and keeps the most streams it had in
/// flight at once.
fn counting_server(runtime: &tokio::runtime::Runtime) -> (SocketAddr, Arc<AtomicU64>) {
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let address = listener.local_addr().expect("address");
    let most = Arc::new(AtomicU64::new(0));
    let kept = Arc::clone(&most);
    runtime.spawn(async move {
        let in_flight = Arc::new(AtomicU64::new(0));
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let (most, in_flight) = (Arc::clone(&kept), Arc::clone(&in_flight));
            tokio::spawn(async move {
                let Ok(mut connection) = h2::server::handshake(stream).await else { return };
                while let Some(Ok((_request, mut respond))) = connection.accept().await {
                    let (most, in_flight) = (Arc::clone(&most), Arc::clone(&in_flight));
                    tokio::spawn(async move {
                        most.fetch_max(in_flight.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        let _ = respond.send_response(http::Response::new(()), true);
                    });
                }
            });
        }
    });
    (address, most)
}

#[test]
fn max_concurrent_streams_caps_the_streams_open_at_once_on_a_connection() {
    let runtime = runtime();
    let (address, most) = counting_server(&runtime);
    for (http2, cap) in [("", None), (r#", "http2": {"max_concurrent_streams": 3}"#, Some(3))] {
        most.store(0, Ordering::SeqCst);
        let extra = format!(r#", "http_version": "2", "connections": {{"pool": 1}}{http2}"#);
        let plan = custom_plan(&format!("http://{address}"), &extra, &get_step("/", None), &closed(12, 1.0), 2.0);
        let (snapshots, _) = run_timed(&plan, 1);
        assert_accounting(&snapshots);
        assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
        assert_eq!(connections_opened(&snapshots), 1);
        let most = most.load(Ordering::SeqCst);
        match cap {
            // Twelve VUs on one connection: all twelve streams at once.
            None => assert!(most > 3, "{most} streams at most without a cap"),
            Some(cap) => assert_eq!(most, cap, "the cap of {cap} streams"),
        }
        // 20 ms per request: about 50 requests/s per stream in flight.
        let requests = total_requests(&snapshots);
        assert!(cap.is_none() || requests < 200, "{requests} requests through 3 streams");
    }
}

/// How the GOAWAY server ends a connection after its GOAWAY.
#[derive(Clone, Copy, PartialEq)]
enum AfterGoAway {
    /// Open for 300 ms more (reading and answering PINGs), then closed.
    Linger,
    /// Closed at once (FIN right after the GOAWAY frame).
    Close,
}

/// A hand-written h2c server: on each connection it answers the first five streams at once,
/// then holds the next three; with three held it answers the first (and, lingering, the second),
/// and sends GOAWAY with the second's id as the last stream id (the third is refused).
fn going_away_server(after: AfterGoAway, runtime: &tokio::runtime::Runtime) -> SocketAddr {
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let address = listener.local_addr().expect("address");
    runtime.spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { continue };
            tokio::spawn(async move {
                let mut preface = [0u8; 24];
                if stream.read_exact(&mut preface).await.is_err() || preface != PREFACE {
                    return;
                }
                let _ = stream.write_all(&frame(SETTINGS, 0, 0, &[])).await;
                // ":status: 200" is the static table's entry 8: one byte of HPACK.
                let answer = |id: u32| frame(HEADERS, 0x5, id, &[0x88]);
                let (mut answered, mut held) = (0, Vec::new());
                let mut read = Vec::new();
                let mut buffer = [0u8; 16 * 1024];
                loop {
                    let Ok(count) = stream.read(&mut buffer).await else { return };
                    if count == 0 {
                        return;
                    }
                    read.extend_from_slice(&buffer[..count]);
                    let mut out = Vec::new();
                    while read.len() >= 9 {
                        let length = usize::from(read[0]) << 16 | usize::from(read[1]) << 8 | usize::from(read[2]);
                        if read.len() < 9 + length {
                            break;
                        }
                        let (kind, flags) = (read[3], read[4]);
                        let id = u32::from_be_bytes([read[5], read[6], read[7], read[8]]) & 0x7fff_ffff;
                        let payload = read[9..9 + length].to_vec();
                        read.drain(..9 + length);
                        match kind {
                            SETTINGS if flags & 1 == 0 => out.extend(frame(SETTINGS, 1, 0, &[])),
                            PING if flags & 1 == 0 => out.extend(frame(PING, 1, 0, &payload)),
                            HEADERS if answered < 5 => {
                                answered += 1;
                                out.extend(answer(id));
                            }
                            HEADERS => held.push(id),
                            _ => {}
                        }
                    }
                    if held.len() == 3 {
                        out.extend(answer(held[0]));
                        if after == AfterGoAway::Linger {
                            out.extend(answer(held[1]));
                        }
                        let mut goaway = held[1].to_be_bytes().to_vec();
                        goaway.extend_from_slice(&0u32.to_be_bytes());
                        out.extend(frame(GOAWAY, 0, 0, &goaway));
                    }
                    if !out.is_empty() && stream.write_all(&out).await.is_err() {
                        return;
                    }
                    if held.len() == 3 {
                        break;
                    }
                }
                if after == AfterGoAway::Linger {
                    let _ = tokio::time::timeout(Duration::from_millis(300), async {
                        while let Ok(count) = stream.read(&mut buffer).await {
                            if count == 0 {
                                break;
                            }
                        }
                    })
                    .await;
                }
                // FIN, then whatever the client still sends is read and dropped (no RST).
                let _ = stream.shutdown().await;
                let _ = tokio::time::timeout(Duration::from_secs(1), async {
                    while matches!(stream.read(&mut buffer).await, Ok(count) if count > 0) {}
                })
                .await;
            });
        }
    });
    address
}

#[test]
fn streams_past_a_goaway_count_as_h2_goaway_and_later_requests_reconnect() {
    let runtime = runtime();
    for after in [AfterGoAway::Linger, AfterGoAway::Close] {
        let address = going_away_server(after, &runtime);
        let extra = r#", "http_version": "2", "connections": {"pool": 1}"#;
        let plan = custom_plan(&format!("http://{address}"), extra, &get_step("/", None), &closed(3, 1.0), 0.5);
        let (snapshots, _) = run_timed(&plan, 1);
        assert_accounting(&snapshots);
        let mut kinds = error_kinds(&snapshots);
        // The streams the server still held when the VUs stopped sending (it waits for three).
        assert!(kinds.remove("cut").unwrap_or(0) <= 2, "{kinds:?}");
        // Every other failed stream was lost to a GOAWAY, none shows as a bare reset.
        assert_eq!(kinds.keys().collect::<Vec<_>>(), vec!["h2_goaway"], "{kinds:?}");
        let (lost, opened, ok) = (kinds["h2_goaway"], connections_opened(&snapshots), total_ok(&snapshots));
        // Per connection: seven answers and one refused stream (lingering), or six and two.
        let per_connection = if after == AfterGoAway::Linger { 1 } else { 2 };
        assert!(opened >= 3, "{opened} connections: the requests after a GOAWAY reconnect");
        assert!(
            lost >= (opened - 1) * per_connection && lost <= opened * per_connection,
            "{lost} lost over {opened} connections"
        );
        assert!(ok >= (opened - 1) * (8 - per_connection), "{ok} answered over {opened} connections");
    }
}

/// An h2c server advertising a stream window of `window` bytes that reads each request's body
/// a piece at a time, 20 ms apart, giving the window back as it goes, then answers.
fn slow_reader(window: u32, runtime: &tokio::runtime::Runtime) -> SocketAddr {
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let address = listener.local_addr().expect("address");
    runtime.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            tokio::spawn(async move {
                let Ok(mut connection) =
                    h2::server::Builder::new().initial_window_size(window).handshake::<_, bytes::Bytes>(stream).await
                else {
                    return;
                };
                while let Some(Ok((request, mut respond))) = connection.accept().await {
                    tokio::spawn(async move {
                        let mut body = request.into_body();
                        while let Some(Ok(piece)) = body.data().await {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            let _ = body.flow_control().release_capacity(piece.len());
                        }
                        let _ = respond.send_response(http::Response::new(()), true);
                    });
                }
            });
        }
    });
    address
}

fn stalls(snapshots: &[horde_engine::Snapshot]) -> u64 {
    snapshots.iter().flat_map(|snapshot| snapshot.steps.iter()).map(|step| step.h2_stalls).sum()
}

#[test]
fn a_body_held_back_by_a_shut_window_counts_as_a_stall_not_an_error() {
    let runtime = runtime();
    let body = "x".repeat(16_000);
    let steps = format!(r#"[{{"name": "upload", "method": "POST", "path": "/", "body": "{body}"}}]"#);
    // A window of 1,024 bytes read every 20 ms: sixteen pieces, about 300 ms of waiting each.
    // HTTP/2's default of 65,535 takes the body at once.
    for (window, stalled) in [(1024, true), (65_535, false)] {
        let address = slow_reader(window, &runtime);
        let plan = custom_plan(&format!("http://{address}"), r#", "http_version": "2""#, &steps, &closed(2, 1.0), 2.0);
        let (snapshots, _) = run_timed(&plan, 1);
        assert_accounting(&snapshots);
        assert!(error_kinds(&snapshots).is_empty(), "{window}: {:?}", error_kinds(&snapshots));
        let ok = total_ok(&snapshots);
        assert!(ok >= 2, "{window}: {ok}");
        if stalled {
            // Each VU's first body may leave before the server's SETTINGS shrink the window.
            let stalls = stalls(&snapshots);
            assert!(stalls > 0 && stalls + 2 >= ok, "{stalls} of {ok} uploads through a 1,024-byte window stalled");
        } else {
            assert_eq!(stalls(&snapshots), 0);
        }
    }
}
