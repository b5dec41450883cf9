//! HTTP/2 with known answers: h2c against the built-in target (per VU and multiplexed by a
//! pool), ALPN over TLS against a hyper server started here (h2 chosen, HTTP/1.1 fallen back
//! to, h2 refused), and a stream reset counted by its code.

mod support;

use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{
    assert_accounting, closed, connections_opened, custom_plan, error_kinds, get_step, run_timed, total_ok,
    total_requests,
};

/// Requests counted over HTTP/1.1 and over HTTP/2 (the steps' `http1` and `http2`).
fn by_protocol(snapshots: &[horde_engine::Snapshot]) -> (u64, u64) {
    let steps = || snapshots.iter().flat_map(|snapshot| snapshot.steps.iter());
    (steps().map(|step| step.http1).sum(), steps().map(|step| step.http2).sum())
}

fn h2c_plan(base_url: &str, target_extra: &str, path: &str, vus: u64, seconds: f64) -> horde_plan::Plan {
    custom_plan(
        base_url,
        &format!(r#", "http_version": "2"{target_extra}"#),
        &get_step(path, None),
        &closed(vus, seconds),
        2.0,
    )
}

#[test]
fn a_pool_of_one_h2c_connection_is_multiplexed_by_all_vus() {
    let target = horde_target::TargetHandle::start(horde_target::TargetConfig::default()).expect("target starts");
    // 50 VUs, 20 ms per request, one connection: over HTTP/1.1 that connection would carry at
    // most 50 requests/s; multiplexed, 50 streams at once carry about 2,500/s.
    let plan = h2c_plan(&target.base_url(), r#", "connections": {"pool": 1}"#, "/delay/20", 50, 2.0);
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    assert_eq!(connections_opened(&snapshots), 1, "one connection for all VUs");
    assert_eq!(by_protocol(&snapshots), (0, total_requests(&snapshots)));
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    let ok = total_ok(&snapshots);
    assert_eq!(ok, total_requests(&snapshots));
    assert!(ok > 1500, "{ok} requests in 2 s: not multiplexed");
}

#[test]
fn each_vu_owns_an_h2c_connection_and_every_request_is_answered() {
    let target = horde_target::TargetHandle::start(horde_target::TargetConfig::default()).expect("target starts");
    let plan = custom_plan(
        &target.base_url(),
        r#", "http_version": "2""#,
        r#"[{"name": "post", "method": "POST", "path": "/status/201", "json": {"a": 1},
             "checks": [{"type": "status", "in": [201]}]},
            {"name": "bytes", "method": "GET", "path": "/bytes/100000"}]"#,
        &closed(8, 1.0),
        2.0,
    );
    let (snapshots, _) = run_timed(&plan, 2);
    assert_accounting(&snapshots);
    assert_eq!(connections_opened(&snapshots), 8, "one connection per VU, kept for all its requests");
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    assert!(total_ok(&snapshots) > 100);
    // A body larger than the RFC's initial 64 KiB window arrived whole: 100,000 bytes each.
    let bytes: u64 = snapshots
        .iter()
        .flat_map(|s| s.steps.iter())
        .filter(|step| step.step == "bytes")
        .map(|step| step.bytes_received)
        .sum();
    let answered: u64 =
        snapshots.iter().flat_map(|s| s.steps.iter()).filter(|step| step.step == "bytes").map(|step| step.ok).sum();
    assert!(answered > 0 && bytes >= answered * 100_000, "{bytes} bytes for {answered} responses");
}

/// An HTTP server over TLS (hyper-util's auto builder) offering `alpn` in the handshake; it
/// counts the requests it served over HTTP/2 and over HTTP/1.1.
struct TlsTarget {
    address: SocketAddr,
    h2_requests: Arc<AtomicU64>,
    h1_requests: Arc<AtomicU64>,
    _runtime: tokio::runtime::Runtime,
}

impl TlsTarget {
    fn start(alpn: &[&[u8]]) -> TlsTarget {
        let certified =
            rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("self-signed certificate");
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key)
            .expect("server certificate");
        config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("bind");
        let address = listener.local_addr().expect("address");
        let (h2_requests, h1_requests) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let counters = (Arc::clone(&h2_requests), Arc::clone(&h1_requests));
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let acceptor = acceptor.clone();
                let counters = (Arc::clone(&counters.0), Arc::clone(&counters.1));
                tokio::spawn(async move {
                    let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await
                    else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                        let counter =
                            if request.version() == hyper::Version::HTTP_2 { &counters.0 } else { &counters.1 };
                        counter.fetch_add(1, Ordering::SeqCst);
                        async {
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(http_body_util::Full::new(
                                bytes::Bytes::from_static(b"ok"),
                            )))
                        }
                    });
                    let builder = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
                    let _ = builder.serve_connection(hyper_util::rt::TokioIo::new(tls), service).await;
                });
            }
        });
        TlsTarget { address, h2_requests, h1_requests, _runtime: runtime }
    }

    fn plan(&self, http_version: &str) -> horde_plan::Plan {
        let base_url = format!("https://localhost:{}", self.address.port());
        let extra = format!(r#", "insecure": true, "http_version": "{http_version}""#);
        custom_plan(&base_url, &extra, &get_step("/", None), &closed(4, 1.0), 2.0)
    }
}

#[test]
fn alpn_chooses_h2_when_the_server_offers_it() {
    let server = TlsTarget::start(&[b"h2", b"http/1.1"]);
    for version in ["2", "auto"] {
        let before = server.h2_requests.load(Ordering::SeqCst);
        let (snapshots, _) = run_timed(&server.plan(version), 1);
        assert_accounting(&snapshots);
        assert!(error_kinds(&snapshots).is_empty(), "{version}: {:?}", error_kinds(&snapshots));
        assert_eq!(connections_opened(&snapshots), 4, "{version}");
        let ok = total_ok(&snapshots);
        assert!(ok > 100, "{version}: {ok}");
        assert_eq!(server.h2_requests.load(Ordering::SeqCst) - before, ok, "{version}: every request over HTTP/2");
        assert_eq!(by_protocol(&snapshots), (0, ok), "{version}: counted over HTTP/2");
    }
    assert_eq!(server.h1_requests.load(Ordering::SeqCst), 0);
}

#[test]
fn auto_falls_back_to_http1_and_2_counts_the_refusal() {
    let server = TlsTarget::start(&[b"http/1.1"]);
    let (snapshots, _) = run_timed(&server.plan("auto"), 1);
    assert_accounting(&snapshots);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    let ok = total_ok(&snapshots);
    assert!(ok > 100 && server.h1_requests.load(Ordering::SeqCst) == ok, "{ok}");
    assert_eq!(by_protocol(&snapshots), (ok, 0), "ALPN chose http/1.1: counted over HTTP/1.1");

    let (snapshots, _) = run_timed(&server.plan("2"), 1);
    assert_accounting(&snapshots);
    let kinds = error_kinds(&snapshots);
    assert_eq!(total_ok(&snapshots), 0);
    assert_eq!(kinds.keys().collect::<Vec<_>>(), vec!["h2_refused"], "{kinds:?}");
    assert_eq!(server.h2_requests.load(Ordering::SeqCst), 0);
    // Refused at the handshake: no request reached a connection.
    assert_eq!(by_protocol(&snapshots), (0, 0));
}

/// An h2c server (the `h2` crate's own) that resets every stream with ENHANCE_YOUR_CALM.
fn resetting_server() -> (SocketAddr, tokio::runtime::Runtime) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("bind");
    let address = listener.local_addr().expect("address");
    runtime.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            tokio::spawn(async move {
                let Ok(mut connection) = h2::server::handshake(stream).await else { return };
                while let Some(Ok((_request, mut respond))) = connection.accept().await {
                    respond.send_reset(h2::Reason::ENHANCE_YOUR_CALM);
                }
            });
        }
    });
    (address, runtime)
}

#[test]
fn a_stream_reset_is_counted_by_its_code_and_the_connection_kept() {
    let (address, _runtime) = resetting_server();
    let plan = custom_plan(
        &format!("http://{address}"),
        r#", "http_version": "2""#,
        &get_step("/", Some(5.0)),
        &closed(2, 1.0),
        2.0,
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    let kinds = error_kinds(&snapshots);
    assert_eq!(kinds.keys().collect::<Vec<_>>(), vec!["h2_reset_enhance_your_calm"], "{kinds:?}");
    assert!(kinds["h2_reset_enhance_your_calm"] > 20, "{kinds:?}");
    // A reset ends one stream, not the connection.
    assert_eq!(connections_opened(&snapshots), 2);
}

#[test]
fn the_built_in_target_over_tls_negotiates_h2_with_a_plan_that_trusts_its_certificate() {
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let tls = horde_target::self_signed(&names).expect("a self-signed certificate");
    let certificate = std::env::temp_dir().join(format!("horde-target-tls-{}.pem", std::process::id()));
    std::fs::write(&certificate, &tls.certificate_pem).expect("the certificate written");
    let config = horde_target::TargetConfig { tls: Some(tls), ..horde_target::TargetConfig::default() };
    let target = horde_target::TargetHandle::start(config).expect("target starts");
    assert!(target.base_url().starts_with("https://127.0.0.1:"), "{}", target.base_url());
    for (version, over_h2) in [("2", true), ("auto", true), ("1.1", false)] {
        let extra = format!(r#", "ca_file": {:?}, "http_version": "{version}""#, certificate.display().to_string());
        let plan = custom_plan(&target.base_url(), &extra, &get_step("/", None), &closed(2, 0.5), 2.0);
        let (snapshots, _) = run_timed(&plan, 1);
        assert_accounting(&snapshots);
        assert!(error_kinds(&snapshots).is_empty(), "{version}: {:?}", error_kinds(&snapshots));
        let ok = total_ok(&snapshots);
        assert!(ok > 50, "{version}: {ok}");
        // HTTP/2 chosen in ALPN; a plan of HTTP/1.1 only counts no protocol.
        assert_eq!(by_protocol(&snapshots), if over_h2 { (0, ok) } else { (0, 0) }, "{version}");
    }
    let _ = std::fs::remove_file(&certificate);
}

#[test]
fn a_fixed_request_kept_in_http2_form_arrives_whole() {
    let target = horde_target::TargetHandle::start(horde_target::TargetConfig::default()).expect("target starts");
    // Nothing templated: each request goes out as its HTTP/2 form made at the plan's start.
    // The game API answers 201, then 200 with a token, only to the method, path, content type
    // and body it expects.
    let credentials = r#"{"login": "ann", "password": "pw"}"#;
    let plan = custom_plan(
        &target.base_url(),
        r#", "http_version": "2""#,
        &format!(
            r#"[{{"name": "login", "method": "POST", "path": "/game/login", "json": {credentials},
                  "checks": [{{"type": "status", "in": [200]}}, {{"type": "json", "expression": "$.token"}}]}}]"#
        ),
        &closed(1, 0.5),
        2.0,
    );
    let mut plan = plan;
    let register = horde_plan::decode(&format!(
        r#"{{"version": 1, "target": {{"base_url": "http://h"}}, "scenarios": [{{"name": "s",
            "steps": [{{"name": "register", "method": "POST", "path": "/game/register", "json": {credentials}}}],
            "workload": {{"type": "closed", "stages": [{{"duration_s": 1, "vus": 1}}]}}}}]}}"#
    ))
    .expect("decodes");
    plan.scenarios[0].setup = register.scenarios[0].steps.clone();
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    let (http1, http2) = by_protocol(&snapshots);
    assert_eq!(http1, 0);
    assert!(http2 > 10 && total_ok(&snapshots) == http2, "{http2} over HTTP/2, {} ok", total_ok(&snapshots));
}
