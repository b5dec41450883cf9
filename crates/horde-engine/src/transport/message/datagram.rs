//! Datagrams off a UDP socket, for every transport that reads one (a connected UDP socket, the
//! impaired network's task, a KCP session's task): into the worker thread's one buffer, and the
//! socket's ICMP errors read as errors rather than waited out.

use std::io;
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// The largest datagram read (UDP's own limit).
const MAX_DATAGRAM: usize = 65_536;

thread_local! {
    /// The one buffer a worker thread reads datagrams into: a VU keeps only what came, so ten
    /// thousand UDP or KCP VUs do not hold ten thousand 64-KiB buffers.
    static DATAGRAM: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; MAX_DATAGRAM]);
}

/// The next datagram on `socket` (cancel safe): waits until the socket is readable, then reads
/// into the thread's buffer (never borrowed across an await) and copies out what came; or the
/// socket's error, when an ICMP port unreachable came back for a datagram it sent
/// (`ConnectionRefused`: nothing listens at the target's port).
pub(crate) async fn recv_datagram(socket: &UdpSocket) -> io::Result<Vec<u8>> {
    loop {
        // An ICMP error comes as an error event (EPOLLERR), never as readability: a receive
        // waiting for readability alone waited out its timeout, and the refusal was reported
        // (if ever) by a later send, or counted as a datagram lost.
        let ready = socket.ready(Interest::READABLE | Interest::ERROR).await?;
        if ready.is_error() {
            // The error event is taken with the error (SO_ERROR), so that the next wait waits.
            let _ = socket.try_io(Interest::ERROR, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
            if let Some(error) = socket.take_error()? {
                return Err(error);
            }
        }
        if !ready.is_readable() {
            continue;
        }
        match try_recv_datagram(socket) {
            // Readiness can be spurious: wait again.
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
            other => return other,
        }
    }
}

/// A datagram already on `socket`, read now (`WouldBlock` when none is).
pub(crate) fn try_recv_datagram(socket: &UdpSocket) -> io::Result<Vec<u8>> {
    DATAGRAM.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        socket.try_recv(&mut buffer).map(|length| buffer[..length].to_vec())
    })
}
