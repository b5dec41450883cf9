//! A lean HTTP/1.1 client: one keep-alive connection per VU (or lent by the pool), requests encoded once per plan,
//! responses parsed with httparse into a buffer the VU reuses. No per-request task, channel or
//! header map: the VU's own task writes the request and reads the response.
//!
//! Beside it, HTTP/2 (`http2`, with the `h2` crate) for plans that ask for it: the same encoded
//! requests, sent as streams of a connection that several requests (a pool's VUs) share.

mod connection;
mod endpoint;
mod http2;
mod request;
mod response;

pub use connection::{read_ca_file, Connection, Connector, SourceAddresses};
pub use endpoint::{Endpoint, Scheme};
pub use http2::{exchange_h2, open, H2Failure, H2Request, H2Sender, Http2Mode, Opened, H2_STALL};
pub use request::{encode_request, RequestParts};
pub use response::{read_response, Capture, ReadError, ReadLimits, Response};
