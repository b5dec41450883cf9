//! HTTP/2 with prior knowledge (h2c) on the target's one port, beside HTTP/1.1.

mod common;

use std::time::{Duration, Instant};

use common::{start_default, Client};

/// Opens one h2c connection and sends `streams` requests for `path` on it at once; returns the
/// statuses and how long all took. Runs on its own runtime, bounded by a timeout.
fn concurrent_streams(address: std::net::SocketAddr, path: &str, streams: usize) -> (Vec<u16>, Duration) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async move {
        let tcp = tokio::net::TcpStream::connect(address).await.expect("connect");
        let (client, connection) = h2::client::handshake(tcp).await.expect("h2c handshake");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let started = Instant::now();
        let mut responses = Vec::new();
        for _ in 0..streams {
            let mut client = client.clone();
            let uri = format!("http://{address}{path}");
            responses.push(tokio::spawn(async move {
                // ready() waits while the server's max-concurrent-streams is reached.
                client = client.ready().await.expect("stream slot");
                let request = http::Request::get(uri).body(()).expect("request");
                let (response, _) = client.send_request(request, true).expect("send");
                let response = response.await.expect("response");
                let status = response.status().as_u16();
                let mut body = response.into_body();
                let mut bytes = Vec::new();
                while let Some(chunk) = body.data().await {
                    let chunk = chunk.expect("body chunk");
                    let _ = body.flow_control().release_capacity(chunk.len());
                    bytes.extend_from_slice(&chunk);
                }
                assert_eq!(bytes, b"ok\n");
                status
            }));
        }
        let mut statuses = Vec::new();
        for response in responses {
            let status = tokio::time::timeout(Duration::from_secs(10), response)
                .await
                .expect("answered in time")
                .expect("stream task");
            statuses.push(status);
        }
        (statuses, started.elapsed())
    })
}

#[test]
fn many_concurrent_streams_on_one_connection_are_all_answered_at_once() {
    let target = start_default();
    // 200 requests of 100 ms each on one connection: answered one after another they would take
    // 20 s; multiplexed, about 100 ms.
    let (statuses, elapsed) = concurrent_streams(target.local_addr(), "/delay/100", 200);
    assert_eq!(statuses.len(), 200);
    assert!(statuses.iter().all(|&status| status == 200), "{statuses:?}");
    assert!(elapsed >= Duration::from_millis(100), "took {elapsed:?}");
    assert!(elapsed < Duration::from_millis(1000), "not multiplexed: took {elapsed:?}");
}

#[test]
fn http1_and_h2c_share_the_port() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    assert_eq!(client.get("/status/418").status, 418);
    let (statuses, _) = concurrent_streams(target.local_addr(), "/", 3);
    assert_eq!(statuses, vec![200, 200, 200]);
    assert_eq!(client.get("/").status, 200);
}
