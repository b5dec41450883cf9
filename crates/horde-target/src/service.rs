//! Serving one request: when it may start (stall), when it is due (delay, capacity), and what it
//! gets back (`routes`, or `game` for paths under `/game/`).
//!
//! Game requests go through the same stall and capacity waits as every other request except
//! stall control, so that a game load test can be run against a target of known capacity; with
//! neither configured they are answered as soon as their body is read.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};

use crate::capacity::CapacityQueue;
use crate::game::{self, World};
use crate::routes::{self, Route};
use crate::shared::Member;
use crate::stall::StallClock;
use crate::websocket::{self, WebSocketState};

/// State shared by every connection of one target.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) stall: StallClock,
    pub(crate) capacity: Option<CapacityQueue>,
    /// This target's membership of the process's shared resource, when it has one.
    pub(crate) resource: Option<Member>,
    pub(crate) game: World,
    pub(crate) websocket: std::sync::Arc<WebSocketState>,
}

/// Serves one request. Timing starts when hyper hands over the parsed head, which is the
/// closest a server gets to "arrival".
pub(crate) async fn handle(shared: &Shared, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
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

    if websocket::is_websocket_path(path) {
        return Ok(websocket::upgrade(&shared.websocket, request));
    }

    if game::is_game_path(path) {
        return Ok(handle_game(shared, arrival, request).await);
    }

    // Read before draining the body: a stall that begins while a slow body trickles in must
    // not hold a request that had already arrived.
    let release = shared.stall.release_after(arrival);
    drain(request.into_body()).await;
    let start = wait_out_stalls(shared, arrival, release).await;

    let delay = match routed {
        Ok(Route::Delay(delay)) => delay,
        _ => Duration::ZERO,
    };
    wait_for_service(shared, start, delay).await;

    Ok(routed.map_or_else(routes::reject, routes::respond))
}

/// Serves a request under `/game/`: the same waits as any request, then the game's answer.
/// The game acts once the waits are over, so a stalled target changes no city.
async fn handle_game(shared: &Shared, arrival: Instant, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let release = shared.stall.release_after(arrival);
    let (head, body) = request.into_parts();
    let body = read_body(body, game::MAX_BODY).await;
    let start = wait_out_stalls(shared, arrival, release).await;
    wait_for_service(shared, start, Duration::ZERO).await;
    game::respond(&shared.game, &head.method, head.uri.path(), &head.headers, body)
}

/// Waits until no stall holds a request that arrived at `arrival`, given `release`, the end of
/// the stall known at arrival; returns when the request may start.
async fn wait_out_stalls(shared: &Shared, arrival: Instant, mut release: Option<Instant>) -> Instant {
    let mut start = arrival;
    // Bounded: each turn moves `start` forward to a stall end, and stalls are finite.
    while let Some(stall_end) = release {
        sleep_until(stall_end).await;
        start = stall_end;
        release = shared.stall.release_after(start);
    }
    start
}

/// Waits until a request that may start at `start` and needs `delay` is due.
async fn wait_for_service(shared: &Shared, start: Instant, delay: Duration) {
    // With a capacity model the delay is served inside the worker's slot, as a slow handler on
    // a real server would hold its worker; the two then add up to one longer service. So is the
    // shared resource's charge, and the request keeps its instance active until it is answered.
    let in_service = shared.resource.as_ref().map(Member::enter);
    let extra = delay + in_service.as_ref().map_or(Duration::ZERO, |request| request.charge);
    let due = match &shared.capacity {
        Some(queue) => queue.admit(start, extra),
        None => start + extra,
    };
    sleep_until(due).await;
    drop(in_service);
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

/// Reads a request body of at most `limit` bytes; `None` if it is longer, in which case the
/// rest is still read and dropped so that the connection stays usable.
async fn read_body(mut body: Incoming, limit: usize) -> Option<Bytes> {
    // A body usually arrives in one frame, which is then kept as it is, without a copy.
    let mut first = Bytes::new();
    let mut joined: Option<Vec<u8>> = None;
    let mut total = 0usize;
    // An error means the client went away; the response write will fail on its own.
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        total = total.saturating_add(data.len());
        if total > limit {
            joined = None;
            first = Bytes::new();
        } else if first.is_empty() && joined.is_none() {
            first = data;
        } else {
            joined.get_or_insert_with(|| first.to_vec()).extend_from_slice(&data);
        }
    }
    if total > limit {
        return None;
    }
    Some(joined.map_or(first, Bytes::from))
}
