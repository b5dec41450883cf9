//! HTTPS: the engine's rustls client against a small tokio-rustls server started by the test,
//! with a self-signed certificate made at test time (rcgen).

mod support;

use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use support::{
    assert_accounting, closed, connections_opened, custom_plan, error_kinds, get_step, run_timed, total_ok,
    total_requests,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/// An HTTP/1.1-over-TLS server on 127.0.0.1 with keep-alive: answers `200 ok` to every request.
struct TlsServer {
    address: SocketAddr,
    handshakes_done: Arc<AtomicU64>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TlsServer {
    fn start() -> TlsServer {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("self-signed certificate");
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key)
            .expect("server certificate");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("non-blocking listener");
        let address = listener.local_addr().expect("local address");
        let handshakes_done = Arc::new(AtomicU64::new(0));
        let (shutdown, mut shutdown_rx) = oneshot::channel::<()>();
        let counter = Arc::clone(&handshakes_done);
        let thread = std::thread::Builder::new()
            .name("tls-server".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                    loop {
                        tokio::select! {
                            _ = &mut shutdown_rx => break,
                            accepted = listener.accept() => {
                                let Ok((stream, _)) = accepted else { continue };
                                let acceptor = acceptor.clone();
                                let counter = Arc::clone(&counter);
                                tokio::spawn(async move {
                                    let Ok(Ok(mut tls)) = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await else {
                                        return;
                                    };
                                    counter.fetch_add(1, Ordering::SeqCst);
                                    let mut pending = Vec::new();
                                    let mut chunk = [0u8; 4096];
                                    loop {
                                        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                                            pending.drain(..end + 4);
                                            if tls.write_all(RESPONSE).await.is_err() || tls.flush().await.is_err() {
                                                return;
                                            }
                                        }
                                        // Idle keep-alive connections are bounded too.
                                        match tokio::time::timeout(Duration::from_secs(20), tls.read(&mut chunk)).await {
                                            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return,
                                            Ok(Ok(read)) => pending.extend_from_slice(&chunk[..read]),
                                        }
                                    }
                                });
                            }
                        }
                    }
                });
                // Dropping the runtime here cancels every connection task.
            })
            .expect("spawn the TLS server");
        TlsServer { address, handshakes_done, shutdown: Some(shutdown), thread: Some(thread) }
    }

    fn port(&self) -> u16 {
        self.address.port()
    }

    fn handshakes_done(&self) -> u64 {
        self.handshakes_done.load(Ordering::SeqCst)
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

const VUS: u64 = 4;

#[test]
fn insecure_https_to_an_ip_works_and_keeps_connections_alive() {
    let server = TlsServer::start();
    let plan = custom_plan(
        &format!("https://127.0.0.1:{}", server.port()),
        r#", "insecure": true, "request_timeout_ms": 5000"#,
        &get_step("/", Some(5.0)),
        &closed(VUS, 2.0),
        2.0,
    );
    let (snapshots, _) = run_timed(&plan, 2);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 40, "only {requests} requests");
    assert_eq!(total_ok(&snapshots), requests, "errors: {:?}", error_kinds(&snapshots));
    let connections = connections_opened(&snapshots);
    assert!((1..=2 * VUS).contains(&connections), "{connections} connections for {VUS} VUs");
    assert!(requests >= 10 * connections, "{requests} requests over {connections} connections: keep-alive not reused");
    assert!(server.handshakes_done() <= 2 * VUS);
}

#[test]
fn a_self_signed_certificate_fails_verification_as_tls() {
    let server = TlsServer::start();
    let plan = custom_plan(
        &format!("https://127.0.0.1:{}", server.port()),
        r#", "request_timeout_ms": 5000"#,
        &get_step("/", Some(20.0)),
        &closed(2, 1.5),
        2.0,
    );
    let (snapshots, took) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 2, "only {requests} requests");
    assert_eq!(total_ok(&snapshots), 0);
    let kinds = error_kinds(&snapshots);
    assert_eq!(kinds.keys().collect::<Vec<_>>(), vec!["tls"], "{kinds:?}");
    assert_eq!(kinds["tls"], requests);
    assert_eq!(server.handshakes_done(), 0, "no handshake may succeed");
    // The run finished on its own (collect() panics otherwise) and soon after its stages.
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn insecure_https_by_host_name_resolves_and_works() {
    let server = TlsServer::start();
    let plan = custom_plan(
        &format!("https://localhost:{}", server.port()),
        r#", "insecure": true, "request_timeout_ms": 5000"#,
        &get_step("/", Some(5.0)),
        &closed(2, 1.5),
        2.0,
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 20, "only {requests} requests; errors: {:?}", error_kinds(&snapshots));
    assert_eq!(total_ok(&snapshots), requests, "errors: {:?}", error_kinds(&snapshots));
    assert!(connections_opened(&snapshots) <= 4);
}
