//! A small city-building game under `/game/`, so that scenario features (setup steps, extracted
//! tokens, cookies, JSONPath filters, weighted choices) can be load-tested against a target
//! whose answers depend on earlier requests, as in a real game's load test: players register
//! and log in, then view their city, list what they can build, build, and collect production.
//!
//! The world lives in memory, one per target, and is lost when the target stops. It is split
//! into `economy` (the rules, on an explicit clock), `state` (accounts, sessions and cities
//! behind sharded locks), `routes` (HTTP) and `json` (what is sent back).

mod economy;
mod json;
mod routes;
mod state;

pub(crate) use routes::{is_game_path, respond, MAX_BODY};
pub(crate) use state::{World, MAX_PLAYERS};
