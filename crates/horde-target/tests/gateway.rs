//! The built-in gateway answered by plain sockets: ping replies, echo, rooms (every move to
//! every player of the room, P² messages for P players moving once), framings, and a bounded stop.

use horde_target::{GatewayConfig, GatewayFraming, GatewayHandle};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn start(framing: GatewayFraming) -> GatewayHandle {
    GatewayHandle::start(GatewayConfig { framing, ..GatewayConfig::default() }).expect("gateway starts")
}

fn line_client(gateway: &GatewayHandle) -> (TcpStream, BufReader<TcpStream>) {
    let stream = TcpStream::connect(gateway.tcp_addr.unwrap()).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let reader = BufReader::new(stream.try_clone().unwrap());
    (stream, reader)
}

fn read_line(reader: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    line.trim_end().to_owned()
}

#[test]
fn tcp_lines_ping_echo_and_rooms() {
    let gateway = start(GatewayFraming::Newline);
    let (mut writer, mut reader) = line_client(&gateway);
    writer.write_all(b"ping 41\r\nhello there\n").unwrap();
    assert_eq!(read_line(&mut reader), "pong 41");
    assert_eq!(read_line(&mut reader), "hello there");
    // Three players join one room; each moves once: each gets the three moves, its own too.
    let mut players: Vec<_> = (0..3).map(|_| line_client(&gateway)).collect();
    for (index, (writer, reader)) in players.iter_mut().enumerate() {
        writer.write_all(b"join arena\n").unwrap();
        assert_eq!(read_line(reader), format!("joined arena {}", index + 1));
    }
    for (index, (writer, _)) in players.iter_mut().enumerate() {
        writer.write_all(format!("move {index}\n").as_bytes()).unwrap();
    }
    for (_, reader) in players.iter_mut() {
        let mut moves: Vec<String> = (0..3).map(|_| read_line(reader)).collect();
        moves.sort();
        assert_eq!(moves, ["move 0", "move 1", "move 2"]);
    }
    // A player who left gets its own move only.
    let (writer, reader) = &mut players[0];
    writer.write_all(b"leave\nmove alone\n").unwrap();
    assert_eq!(read_line(reader), "left");
    assert_eq!(read_line(reader), "move alone");
    assert_eq!(gateway.counts.tcp_in.load(Ordering::Relaxed), 2 + 3 + 3 + 2);
}

#[test]
fn tcp_length_prefixes_frame_both_ways() {
    let gateway = start(GatewayFraming::Length(2));
    let mut stream = TcpStream::connect(gateway.tcp_addr.unwrap()).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // Two messages in one write, the second split across the boundary of the first read.
    stream.write_all(&[0, 6, b'p', b'i', b'n', b'g', b' ', b'7', 0, 2, b'h', b'i']).unwrap();
    let mut reply = [0u8; 8 + 4];
    stream.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, &[0, 6, b'p', b'o', b'n', b'g', b' ', b'7', 0, 2, b'h', b'i']);
}

#[test]
fn udp_datagrams_are_messages_and_rooms_follow_addresses() {
    let gateway = start(GatewayFraming::Newline);
    let address = gateway.udp_addr.unwrap();
    let players: Vec<UdpSocket> = (0..4).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
    let mut buffer = [0u8; 1500];
    for player in &players {
        player.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        player.send_to(b"join r", address).unwrap();
        let (length, _) = player.recv_from(&mut buffer).unwrap();
        assert!(buffer[..length].starts_with(b"joined r "));
    }
    players[0].send_to(b"ping 9", address).unwrap();
    let (length, _) = players[0].recv_from(&mut buffer).unwrap();
    assert_eq!(&buffer[..length], b"pong 9");
    for player in &players {
        player.send_to(b"move", address).unwrap();
    }
    for player in &players {
        for _ in 0..4 {
            let (length, _) = player.recv_from(&mut buffer).unwrap();
            assert_eq!(&buffer[..length], b"move");
        }
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while gateway.counts.udp_out.load(Ordering::Relaxed) < 4 + 1 + 16 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(gateway.counts.udp_out.load(Ordering::Relaxed), 4 + 1 + 16, "4 joined, 1 pong, 4² moves");
}

#[test]
fn a_gateway_stops_within_its_bound_with_clients_connected() {
    let gateway = start(GatewayFraming::Newline);
    let _client = TcpStream::connect(gateway.tcp_addr.unwrap()).unwrap();
    let began = Instant::now();
    gateway.stop();
    assert!(began.elapsed() < Duration::from_secs(3), "{:?}", began.elapsed());
}

#[test]
fn a_bad_length_prefix_is_refused() {
    let error = GatewayHandle::start(GatewayConfig { framing: GatewayFraming::Length(3), ..GatewayConfig::default() })
        .unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}
