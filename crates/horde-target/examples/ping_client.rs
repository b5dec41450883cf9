//! The gateway bench's reference client (`bench/gateway.py`): the plainest pinging a program can
//! do, to weigh Horde's CPU per message against. N TCP connections (newline framing) or UDP
//! sockets on one current-thread runtime, each sending `ping N` and reading its `pong N` in a
//! loop for S seconds, no templates, no metrics but a count.
//!
//!     cargo run --release -p horde-target --example ping_client -- tcp 127.0.0.1:7000 50 5
//!
//! Prints `{"messages": M, "seconds": S}`, M counting both ways.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpStream, UdpSocket};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: ping_client tcp|udp HOST:PORT CONNECTIONS SECONDS");
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
