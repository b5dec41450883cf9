//! How requests reach the target: HTTP/1.1 and HTTP/2 (`http`), the connection pools a worker's
//! VUs share (`pool`, and `h2_pool` for multiplexed HTTP/2), the SQL wire protocol (`sql`) and
//! the message transports (`message`: TCP, UDP, KCP and WebSocket, the impaired network). Each
//! knows its own steps' templated text and rules (`crate::template`, `crate::response_rules`)
//! but no scenario and no run.

pub(crate) mod h2_pool;
pub mod http;
pub(crate) mod message;
pub(crate) mod pool;
pub(crate) mod sql;
