//! Serving one request: when it may start (stall), when it is due (delay, capacity), and what it
//! gets back (`routes`).

use std::convert::Infallible;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};

use crate::capacity::CapacityQueue;
use crate::routes::{self, Route};
use crate::stall::StallClock;

/// State shared by every connection of one target.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) stall: StallClock,
    pub(crate) capacity: Option<CapacityQueue>,
}

/// Serves one request. Timing starts when hyper hands over the parsed head, which is the
/// closest a server gets to "arrival".
pub(crate) async fn handle(
    shared: &Shared,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let arrival = Instant::now();
    let path = request.uri().path();
    let routed = routes::route(path);

    if routes::is_stall_control(path) {
        if let Ok(Route::Stall(duration)) = routed {
            shared.stall.stall(arrival, duration);
        }
        drain(request.into_body()).await;
        return Ok(routed.map_or_else(routes::reject, routes::respond));
    }

    // Read before draining the body: a stall that begins while a slow body trickles in must
    // not hold a request that had already arrived.
    let mut release = shared.stall.release_after(arrival);
    drain(request.into_body()).await;

    let mut start = arrival;
    // Bounded: each turn moves `start` forward to a stall end, and stalls are finite.
    while let Some(stall_end) = release {
        sleep_until(stall_end).await;
        start = stall_end;
        release = shared.stall.release_after(start);
    }

    let delay = match routed {
        Ok(Route::Delay(delay)) => delay,
        _ => Duration::ZERO,
    };
    // With a capacity model the delay is served inside the worker's slot, as a slow handler on
    // a real server would hold its worker; the two then add up to one longer service.
    let due = match &shared.capacity {
        Some(queue) => queue.admit(start, delay),
        None => start + delay,
    };
    sleep_until(due).await;

    Ok(routed.map_or_else(routes::reject, routes::respond))
}

/// Sleeps until `deadline`, skipping the timer entirely when it has passed: most requests never
/// wait, and a zero-length timer still costs a trip through the timer wheel.
async fn sleep_until(deadline: Instant) {
    if deadline > Instant::now() {
        tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await;
    }
}

/// Reads and discards a request body so that the connection can be reused for the next
/// request. Frames are dropped as they come, so a large upload costs no memory.
async fn drain(mut body: Incoming) {
    // An error means the client went away; the response write will fail on its own.
    while let Some(Ok(_frame)) = body.frame().await {}
}
