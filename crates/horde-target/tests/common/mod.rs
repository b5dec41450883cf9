//! A tiny blocking HTTP/1.1 client for the target's tests: one keep-alive connection, requests
//! sent one at a time, responses framed by `Content-Length` alone (which the target promises).

#![allow(dead_code)] // each test file uses a different part

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use horde_target::{TargetConfig, TargetHandle};

/// No response in a test should take this long; a hung target fails the test instead of
/// hanging it.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

pub fn start_default() -> TargetHandle {
    TargetHandle::start(TargetConfig::default()).expect("target starts")
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    pub fn content_length(&self) -> Option<usize> {
        self.header("content-length").map(|value| value.parse().expect("numeric Content-Length"))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    pub fn connect(address: SocketAddr) -> Client {
        let stream = TcpStream::connect_timeout(&address, READ_TIMEOUT).expect("connect");
        stream.set_read_timeout(Some(READ_TIMEOUT)).expect("read timeout");
        stream.set_nodelay(true).expect("nodelay");
        let writer = stream.try_clone().expect("clone stream");
        Client { reader: BufReader::new(stream), writer }
    }

    pub fn get(&mut self, path: &str) -> Response {
        self.request("GET", path, b"").expect("request")
    }

    /// Times one GET: from just before the request is written to the last body byte.
    pub fn timed_get(&mut self, path: &str) -> (Response, Duration) {
        let started = Instant::now();
        let response = self.get(path);
        (response, started.elapsed())
    }

    pub fn request(&mut self, method: &str, path: &str, body: &[u8]) -> io::Result<Response> {
        self.request_with(method, path, &[], body)
    }

    /// A request with extra headers, such as `("Authorization", "Bearer ...")`.
    pub fn request_with(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<Response> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: horde-test\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if !body.is_empty() {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let mut message = head.into_bytes();
        message.extend_from_slice(body);
        self.writer.write_all(&message)?;
        self.read_response(method == "HEAD")
    }

    fn read_response(&mut self, head_only: bool) -> io::Result<Response> {
        let status_line = self.read_line()?;
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| io::Error::other(format!("bad status line {status_line:?}")))?;
        let mut headers = Vec::new();
        loop {
            let line = self.read_line()?;
            if line.is_empty() {
                break;
            }
            let (name, value) =
                line.split_once(':').ok_or_else(|| io::Error::other(format!("bad header line {line:?}")))?;
            headers.push((name.trim().to_string(), value.trim().to_string()));
        }
        let mut response = Response { status, headers, body: Vec::new() };
        let bodiless = head_only || status == 204 || status == 304;
        if !bodiless {
            let length =
                response.content_length().ok_or_else(|| io::Error::other("response without Content-Length"))?;
            response.body = vec![0; length];
            self.reader.read_exact(&mut response.body)?;
        }
        Ok(response)
    }

    fn read_line(&mut self) -> io::Result<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
        }
        Ok(line.trim_end_matches(['\r', '\n']).to_string())
    }

    /// Whether the server has closed this connection (reads EOF within `wait`).
    pub fn is_closed_within(&mut self, wait: Duration) -> bool {
        self.reader.get_ref().set_read_timeout(Some(wait)).expect("read timeout");
        let mut byte = [0u8; 1];
        let closed = matches!(self.reader.read(&mut byte), Ok(0));
        self.reader.get_ref().set_read_timeout(Some(READ_TIMEOUT)).expect("read timeout");
        closed
    }
}

pub fn median(mut values: Vec<Duration>) -> Duration {
    assert!(!values.is_empty());
    values.sort();
    values[values.len() / 2]
}

/// Runs `clients` closed-loop clients (no think time) for `duration`, each on its own
/// keep-alive connection to one of `addresses` in turn; returns every completion as an offset from the common start.
pub fn closed_loop(addresses: &[SocketAddr], clients: usize, duration: Duration) -> Vec<Duration> {
    // Bounds the loop even if the target answered instantly.
    const MAX_REQUESTS_PER_CLIENT: usize = 5_000;
    let barrier = Arc::new(Barrier::new(clients + 1));
    let threads: Vec<_> = (0..clients)
        .map(|index| {
            let address = addresses[index % addresses.len()];
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                let mut client = Client::connect(address);
                barrier.wait();
                let started = Instant::now();
                let mut completions = Vec::new();
                while started.elapsed() < duration && completions.len() < MAX_REQUESTS_PER_CLIENT {
                    assert_eq!(client.get("/").status, 200);
                    completions.push(started.elapsed());
                }
                completions
            })
        })
        .collect();
    barrier.wait();
    threads.into_iter().flat_map(|thread| thread.join().expect("client thread")).collect()
}
