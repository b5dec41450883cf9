//! Property tests of the HTTP/1.1 response reader: whatever bytes a connection delivers (in
//! whatever pieces, then closed), `read_response` ends in a `Response` or a `ReadError` of a
//! documented kind, never panics or hangs, and keeps no more than its limits allow. The bytes
//! come over a real loopback connection (the reader's `Connection` is a socket), written by a
//! task of the same runtime.

use horde_engine::http::{read_response, Capture, Connection, ReadError, ReadLimits, Response};
use horde_metrics::ErrorKind;
use proptest::prelude::*;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

struct Read {
    result: Result<Response, ReadError>,
    body_kept: usize,
    body_truncated: bool,
}

fn read(pieces: Vec<Vec<u8>>, limits: ReadLimits, keep_body: bool, is_head: bool) -> Read {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let server = async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let _ = stream.set_nodelay(true);
            for piece in pieces {
                if stream.write_all(&piece).await.is_err() {
                    return;
                }
                tokio::task::yield_now().await;
            }
            let _ = stream.shutdown().await;
        };
        let client = async move {
            let stream = TcpStream::connect(address).await.expect("connect");
            let mut connection = Connection::Plain(stream);
            let mut buffer = Vec::new();
            let mut capture = Capture::default();
            capture.keep_body = keep_body;
            let read = read_response(&mut connection, &mut buffer, is_head, &mut capture, limits);
            let result =
                tokio::time::timeout(Duration::from_secs(10), read).await.expect("the read ends when the bytes do");
            Read { result, body_kept: capture.body.len(), body_truncated: capture.body_truncated }
        };
        tokio::join!(server, client).1
    })
}

/// The kinds reading a response may end in (connecting and checks are not its business).
fn is_reading_kind(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::Protocol | ErrorKind::HeadersTooLarge | ErrorKind::Reset | ErrorKind::Io)
}

fn check(outcome: &Read, total: usize, limits: ReadLimits) {
    match &outcome.result {
        Ok(response) => {
            assert!((100..=999).contains(&response.status), "status {}", response.status);
            assert!(response.bytes_received <= total as u64, "{} received of {total}", response.bytes_received);
        }
        Err(error) => assert!(is_reading_kind(error.kind), "read ended as {:?}", error.kind),
    }
    assert!(outcome.body_kept <= limits.max_kept_body_bytes, "kept {} bytes past the bound", outcome.body_kept);
    if outcome.body_truncated {
        assert_eq!(outcome.body_kept, limits.max_kept_body_bytes, "truncated short of the bound");
    }
}

/// Splits `bytes` into pieces at the given cut points.
fn pieces(bytes: &[u8], cuts: &[prop::sample::Index]) -> Vec<Vec<u8>> {
    let mut points: Vec<usize> = cuts.iter().map(|cut| cut.index(bytes.len() + 1)).collect();
    points.push(0);
    points.push(bytes.len());
    points.sort_unstable();
    points.dedup();
    points.windows(2).map(|pair| bytes[pair[0]..pair[1]].to_vec()).collect()
}

/// Responses a server might send, to be mangled: status lines, headers (many of them at times),
/// every framing, interim responses, bodies.
fn plausible_response() -> impl Strategy<Value = Vec<u8>> {
    let status = prop_oneof![
        Just("200 OK"),
        Just("204 No Content"),
        Just("304 Not Modified"),
        Just("404 Not Found"),
        Just("503 Busy"),
        Just("101 Switching"),
        Just("100 Continue"),
        Just("2x0 Bad"),
        Just("20 Short"),
        Just("999 Odd"),
        Just("200"),
    ];
    let version = prop_oneof![Just("HTTP/1.1"), Just("HTTP/1.0"), Just("HTTP/2.0"), Just("HTTP/1.1  "), Just("ICY")];
    let framing = prop_oneof![
        (0usize..400).prop_map(|length| format!("Content-Length: {length}\r\n")),
        Just("Content-Length: -1\r\n".to_owned()),
        Just("Content-Length: 18446744073709551616\r\n".to_owned()),
        Just("Transfer-Encoding: chunked\r\n".to_owned()),
        Just("Transfer-Encoding: gzip, chunked\r\n".to_owned()),
        Just(String::new()),
    ];
    let body = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300),
        Just(b"5\r\nhello\r\n0\r\n\r\n".to_vec()),
        Just(b"ffffffffffffffffff\r\n".to_vec()),
        Just(b"3;ext=1\r\nabc\r\n0\r\nTrailer: x\r\n\r\n".to_vec()),
        Just(b"zz\r\n".to_vec()),
    ];
    (
        prop::option::of(Just(b"HTTP/1.1 100 Continue\r\n\r\n".to_vec())),
        version,
        status,
        0usize..200,
        framing,
        prop::option::of(Just("Connection: close\r\n")),
        body,
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
    )
        .prop_map(|(interim, version, status, headers, framing, close, body, flips)| {
            let mut bytes = interim.unwrap_or_default();
            bytes.extend_from_slice(format!("{version} {status}\r\n").as_bytes());
            for index in 0..headers {
                bytes.extend_from_slice(format!("X-{index}: {}\r\n", "v".repeat(index % 7)).as_bytes());
            }
            bytes.extend_from_slice(framing.as_bytes());
            bytes.extend_from_slice(close.unwrap_or("").as_bytes());
            bytes.extend_from_slice(b"\r\n");
            bytes.extend_from_slice(&body);
            for (at, byte) in flips {
                let at = at.index(bytes.len());
                bytes[at] = byte;
            }
            bytes
        })
}

fn limits() -> impl Strategy<Value = ReadLimits> {
    prop_oneof![
        Just(ReadLimits::default()),
        (1024usize..4096, 0usize..64)
            .prop_map(|(max_head_bytes, max_kept_body_bytes)| ReadLimits { max_head_bytes, max_kept_body_bytes }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_end_in_a_response_or_a_read_error(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        limits in limits(), keep_body in any::<bool>(), is_head in any::<bool>(),
    ) {
        let outcome = read(pieces(&bytes, &cuts), limits, keep_body, is_head);
        check(&outcome, bytes.len(), limits);
    }

    #[test]
    fn mangled_responses_end_in_a_response_or_a_read_error(
        bytes in plausible_response(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        limits in limits(), keep_body in any::<bool>(), is_head in any::<bool>(),
    ) {
        let outcome = read(pieces(&bytes, &cuts), limits, keep_body, is_head);
        check(&outcome, bytes.len(), limits);
    }
}

#[test]
fn a_valid_response_with_hundreds_of_headers_is_read_in_any_pieces() {
    let mut bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n".to_vec();
    for index in 0..700 {
        bytes.extend_from_slice(format!("X-{index}: {index}\r\n").as_bytes());
    }
    bytes.extend_from_slice(b"\r\nhello");
    for split in [1, 100, 4095, 4096, 4097, bytes.len() - 3] {
        let outcome = read(vec![bytes[..split].to_vec(), bytes[split..].to_vec()], ReadLimits::default(), true, false);
        let response = outcome.result.expect("a valid response");
        assert_eq!((response.status, response.bytes_received), (200, bytes.len() as u64));
        assert_eq!(outcome.body_kept, 5);
    }
    let small = ReadLimits { max_head_bytes: 4096, ..ReadLimits::default() };
    let outcome = read(vec![bytes.clone()], small, false, false);
    assert_eq!(outcome.result.expect_err("past the bound").kind, ErrorKind::HeadersTooLarge);
}
