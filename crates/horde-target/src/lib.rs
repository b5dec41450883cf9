//! The built-in target: a small HTTP server whose answers are known in advance, used for demos
//! and for known-answer tests of Horde's numbers. It speaks HTTP/1.1 and HTTP/2 in clear text
//! (h2c with prior knowledge) on the same port: the protocol is told by the connection's first
//! bytes. An HTTP/2 connection allows [`MAX_CONCURRENT_STREAMS`] streams at once.
//!
//! A load tester is only trustworthy if its figures can be checked. This target makes that
//! possible: a `/delay/50` request takes 50 ms, so a measured p50 far from 50 ms is the
//! generator's error; a capacity of `W` workers at `S` ms each serves exactly `W * 1000 / S`
//! requests per second, so a measured maximum throughput elsewhere is wrong; a stall freezes
//! the target for a known time, so an open-model run that does not show it in its high
//! percentiles suffers from coordinated omission.
//!
//! The target runs on a thread of its own with its own tokio runtime ([`TargetHandle::start`]),
//! so it can be started from plain Rust, from Python through `horde-py`, or from the engine's
//! integration tests, and it stops within a bounded time ([`TargetHandle::stop`] or drop).
//!
//! Beside it, [`GatewayHandle`] serves a game gateway on TCP and UDP (echo, ping replies, rooms
//! whose moves are broadcast to every player): the message transports' target. The HTTP port
//! speaks WebSocket too (`/ws/echo`, `/ws/delay/{ms}`, `/ws/rooms/{room}`, the gateway's rooms;
//! see `websocket.rs`).
//!
//! It also hosts a small city-building game under `/game/` (see [below](#the-game)), so that
//! stateful scenarios (register, log in, act on what earlier answers said) have a target too.
//!
//! # Endpoints
//!
//! Any method; request bodies are read and discarded; connections are kept alive; every
//! response carries `Content-Length` (except those HTTP forbids a body: `204`, `304`).
//!
//! | path | response |
//! | --- | --- |
//! | `/` | `200`, body `ok\n` (`text/plain`) |
//! | `/delay/{ms}` | `200` `ok\n` after `ms` milliseconds (integer or decimal) from arrival |
//! | `/status/{code}` | that status, `200` to `599` (a `1xx` is refused with `400`) |
//! | `/bytes/{n}` | `200` with exactly `n` zero bytes, `n` at most 16 MiB (`400` beyond) |
//! | `/stall/{ms}` | `200` at once; every other request arriving in the next `ms` milliseconds waits until the stall ends. Requests already in service are not affected; a later stall extends an earlier one |
//! | `/game/...` | the game, below |
//! | `/ws/echo`, `/ws/delay/{ms}`, `/ws/rooms/{room}` | a WebSocket upgrade (`101`): each message echoed, echoed after `ms`, or sent to every member of the room; `400` for a request that is no upgrade |
//! | anything else | `404` |
//!
//! A malformed number gets `400` with a one-line reason. Delays and stalls are at most one hour.
//!
//! # The game
//!
//! One world per target, in memory, for at most 2,000,000 players. Unlike the endpoints above,
//! method and body matter: requests and responses are JSON (`Content-Type: application/json`),
//! every error is `{"error": "one-line reason"}`, an unknown `/game/` path is `404`, a wrong
//! method `405` (with `Allow`), a body over 16 KiB `413`, and malformed JSON or missing fields
//! `400`. Amounts (`{"gold": int, "wood": int, "stone": int}`, written `A` below) are whole
//! units.
//!
//! | request | success | refusals |
//! | --- | --- | --- |
//! | `POST /game/register` `{"login", "password"}` | `201` `{"player_id": int}`, ids 1, 2, 3... | `409` `login taken`; `503` `world full`; `400` empty login or either over 128 bytes |
//! | `POST /game/login` `{"login", "password"}` | `200` `{"token": str, "player_id": int}` and `Set-Cookie: session=TOKEN; Path=/game` | `401` `bad login or password` |
//! | `GET /game/city` | `200` `{"player_id", "resources": A, "buildings": [{"id", "kind", "level", "ready": bool}]}` | |
//! | `GET /game/buildings` | `200` `{"buildings": [{"kind", "cost": A, "can_build": bool}]}`, one entry per kind | |
//! | `POST /game/construct` `{"kind"}` | `201` `{"building_id": int, "ready_at_ms": int}` (Unix ms); the cost is spent | `409` `not enough resources`; `409` `city full: at most 50 buildings`; `400` unknown kind |
//! | `POST /game/collect` (no body) | `200` `{"collected": A, "resources": A}` | |
//! | `GET /game/resources` | `200` `A` | |
//!
//! All but register and login need the session: `Authorization: Bearer TOKEN` or the cookie
//! `session=TOKEN`; without one that is valid, `401` (with `WWW-Authenticate: Bearer`). Every
//! login gets a new token and all stay valid. `can_build` is true when the stock covers the
//! cost and the city has fewer than 50 buildings.
//!
//! A new city has 300 of each resource and no building. Production accrues by the millisecond
//! and enters the stock only on `collect`: the city itself yields 10 of each per second, and a
//! building from when it is ready (`ready` in `/game/city`), per second:
//!
//! | kind | cost (gold, wood, stone) | build time | yield per second |
//! | --- | --- | --- | --- |
//! | `farm` | 50, 100, 50 | 2 s | 5 gold |
//! | `sawmill` | 100, 50, 50 | 2 s | 5 wood |
//! | `quarry` | 100, 100, 0 | 2 s | 5 stone |
//! | `barracks` | 200, 150, 150 | 5 s | none |
//! | `market` | 250, 100, 100 | 4 s | 8 gold |
//! | `wall` | 100, 50, 300 | 3 s | none |
//!
//! Nothing is random: a fresh target gives the same ids and tokens to the same sequence of
//! requests. Tokens are not secure (their check value is not cryptographic), only hard to
//! mistype.
//!
//! # Capacity model
//!
//! With [`TargetConfig::capacity`] set to [`Capacity`] `{ workers: W, service_ms: S }`, every
//! request except `/stall/...`, game requests included, is served by one of `W` workers and
//! takes `S` ms of service (plus its delay, for `/delay/{ms}`: the delay is served inside the
//! worker's slot). The workers are virtual: completion instants are computed from when each
//! worker becomes free, so tokio's millisecond timer granularity and late wake-ups do not lower
//! the throughput. A stall applies first (the request's arrival becomes the stall's end), then
//! the queue. Stalls hold game requests too, and a game request acts on the world only once
//! its waits are over; with neither configured, the game answers at once.
//!
//! # A shared resource
//!
//! With [`TargetConfig::shared`] set to [`SharedCosts`] `{ serial_ms: s, crosstalk_ms: c }`, the
//! targets of one process share a resource: a request admitted while `n` of them have a request
//! in service is charged `n·(s + c·(n−1))` ms inside its worker's slot (its own hold of the
//! resource, `c` ms of it per other active instance, and one hold of each other instance queued
//! behind). Under a saturating closed load, `n` instances of `W` workers and `S` ms then serve
//! exactly `X(n) = λn / (1 + σ(n−1) + κn(n−1))` requests per second, the Universal Scalability
//! Law with `λ = W/(S+s)` per instance, `σ = s/(S+s)` and `κ = c/(S+s)`; the derivation is in
//! `shared.rs`.
//!
//! # Example
//!
//! ```
//! use horde_target::{Capacity, ServiceTimes, TargetConfig, TargetHandle};
//!
//! let target = TargetHandle::start(TargetConfig {
//!     capacity: Some(Capacity { workers: 4, service_ms: 20.0, service_times: ServiceTimes::Fixed }), // at most 200 requests/s
//!     ..TargetConfig::default()
//! })?;
//! println!("load it at {}", target.base_url());
//! target.stop();
//! # Ok::<(), horde_target::TargetError>(())
//! ```

mod capacity;
mod config;
mod game;
mod gateway;
mod routes;
mod server;
mod service;
mod shared;
mod stall;
mod tls;
mod websocket;

pub use config::{Capacity, ServiceTimes, TargetConfig, TargetError, TargetTls, MAX_SHARED_MS};
pub use gateway::{GatewayConfig, GatewayCounts, GatewayFraming, GatewayHandle, MAX_ROOM_PLAYERS, MAX_UDP_PLAYERS};
pub use server::{TargetHandle, MAX_CONCURRENT_STREAMS};
pub use shared::SharedCosts;
pub use tls::self_signed;
pub use websocket::accept_key as websocket_accept_key;
