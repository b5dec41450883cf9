//! A lean HTTP/1.1 client: one keep-alive connection per VU (or lent by the pool), requests encoded once per plan,
//! responses parsed with httparse into a buffer the VU reuses. No per-request task, channel or
//! header map: the VU's own task writes the request and reads the response.

mod connection;
mod endpoint;
mod request;
mod response;

pub use connection::{read_ca_file, Connection, Connector, SourceAddresses};
pub use endpoint::{Endpoint, Scheme};
pub use request::{encode_request, RequestParts};
pub use response::{read_response, Capture, ReadError, ReadLimits, Response};
