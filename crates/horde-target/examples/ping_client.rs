//! The gateway bench's reference client (`bench/gateway.py`): the plainest pinging a program can
//! do, to weigh Horde's CPU per message against. N TCP connections (newline framing), UDP
//! sockets or WebSockets (`ws`: the target's `/ws/echo`, masked text frames out, the echo read
//! back) on one current-thread runtime, each sending `ping N` and reading its answer in a loop
//! for S seconds, no templates, no metrics but a count.
//!
//!     cargo run --release -p horde-target --example ping_client -- tcp 127.0.0.1:7000 50 5
//!     cargo run --release -p horde-target --example ping_client -- ws 127.0.0.1:8080 50 5
//!
//! Prints `{"messages": M, "seconds": S}`, M counting both ways.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpStream, UdpSocket};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: ping_client tcp|udp|ws HOST:PORT CONNECTIONS SECONDS");
        std::process::exit(2);
    }
    let (transport, address) = (args[1].clone(), args[2].clone());
    let connections: usize = args[3].parse().expect("CONNECTIONS is a number");
    let seconds: f64 = args[4].parse().expect("SECONDS is a number");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let local = tokio::task::LocalSet::new();
    let messages = Rc::new(Cell::new(0u64));
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    local.block_on(&runtime, async {
        let tasks: Vec<_> = (0..connections)
            .map(|_| {
                let (transport, address, messages) = (transport.clone(), address.clone(), Rc::clone(&messages));
                tokio::task::spawn_local(async move {
                    match transport.as_str() {
                        "tcp" => tcp(&address, deadline, &messages).await,
                        "ws" => websocket(&address, deadline, &messages).await,
                        _ => udp(&address, deadline, &messages).await,
                    }
                })
            })
            .collect();
        for task in tasks {
            let _ = task.await;
        }
    });
    println!("{{\"messages\": {}, \"seconds\": {seconds}}}", messages.get());
}

async fn tcp(address: &str, deadline: Instant, messages: &Cell<u64>) {
    let Ok(stream) = TcpStream::connect(address).await else { return };
    let _ = stream.set_nodelay(true);
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    let mut line = String::new();
    let mut seq = 0u64;
    // Bounded by the deadline.
    while Instant::now() < deadline {
        seq += 1;
        if writer.write_all(format!("ping {seq}\n").as_bytes()).await.is_err() {
            return;
        }
        line.clear();
        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        messages.set(messages.get() + 2);
    }
}

/// The upgrade to `/ws/echo`, then `ping N` in a masked text frame and its echo read back.
async fn websocket(address: &str, deadline: Instant, messages: &Cell<u64>) {
    let Ok(mut stream) = TcpStream::connect(address).await else { return };
    let _ = stream.set_nodelay(true);
    let upgrade = format!(
        "GET /ws/echo HTTP/1.1\r\nHost: {address}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    if stream.write_all(upgrade.as_bytes()).await.is_err() {
        return;
    }
    let mut buffer = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            buffer.drain(..end + 4);
            break;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
    }
    let mask = [0x12u8, 0x34, 0x56, 0x78];
    let mut frame = Vec::with_capacity(64);
    let mut seq = 0u64;
    while Instant::now() < deadline {
        seq += 1;
        let payload = format!("ping {seq}");
        frame.clear();
        frame.extend_from_slice(&[0x81, 0x80 | payload.len() as u8]);
        frame.extend_from_slice(&mask);
        frame.extend(payload.bytes().enumerate().map(|(index, byte)| byte ^ mask[index % 4]));
        if stream.write_all(&frame).await.is_err() {
            return;
        }
        // One small unmasked frame back: a 2-byte header and the payload.
        loop {
            if buffer.len() >= 2 && buffer.len() >= 2 + usize::from(buffer[1] & 0x7F) {
                let length = 2 + usize::from(buffer[1] & 0x7F);
                buffer.drain(..length);
                break;
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(read) => buffer.extend_from_slice(&chunk[..read]),
            }
        }
        messages.set(messages.get() + 2);
    }
}

async fn udp(address: &str, deadline: Instant, messages: &Cell<u64>) {
    let Ok(socket) = UdpSocket::bind("127.0.0.1:0").await else { return };
    if socket.connect(address).await.is_err() {
        return;
    }
    let mut buffer = [0u8; 1500];
    let mut seq = 0u64;
    while Instant::now() < deadline {
        seq += 1;
        if socket.send(format!("ping {seq}").as_bytes()).await.is_err() {
            return;
        }
        // A lost reply is waited for 100 ms, then the next ping goes.
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(100), socket.recv(&mut buffer)).await {
            messages.set(messages.get() + 2);
        }
    }
}
