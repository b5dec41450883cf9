//! Opening connections to the target: TCP (bound first to a source address when the plan
//! lists some), then TLS (rustls) for https.

use super::{Endpoint, Scheme};
use crate::error::EngineError;
use horde_metrics::ErrorKind;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// An open connection to the target, owned by one VU (or, with a pool, lent to one VU per
/// exchange).
pub enum Connection {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Connection {
    pub async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Connection::Plain(stream) => stream.write_all(bytes).await,
            Connection::Tls(stream) => {
                stream.write_all(bytes).await?;
                stream.flush().await
            }
        }
    }

    /// Whether the TLS handshake chose h2 in ALPN (never, in clear text).
    pub fn negotiated_h2(&self) -> bool {
        match self {
            Connection::Plain(_) => false,
            Connection::Tls(stream) => stream.get_ref().1.alpn_protocol() == Some(b"h2"),
        }
    }

    pub async fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self {
            Connection::Plain(stream) => stream.read(buffer).await,
            Connection::Tls(stream) => stream.read(buffer).await,
        }
    }

    /// Reads into the spare capacity of `buffer` (cancel safe: what was read is in `buffer`).
    pub async fn read_buf(&mut self, buffer: &mut bytes::BytesMut) -> io::Result<usize> {
        match self {
            Connection::Plain(stream) => stream.read_buf(buffer).await,
            Connection::Tls(stream) => stream.read_buf(buffer).await,
        }
    }

    /// Writes some of `bytes` (cancel safe: the count says how many went); [`Connection::flush`]
    /// then pushes a TLS stream's records out.
    pub async fn write_some(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Connection::Plain(stream) => stream.write(bytes).await,
            Connection::Tls(stream) => stream.write(bytes).await,
        }
    }

    pub async fn flush(&mut self) -> io::Result<()> {
        match self {
            Connection::Plain(_) => Ok(()),
            Connection::Tls(stream) => stream.flush().await,
        }
    }
}

/// Everything needed to open a connection; built once per run and shared by all VUs of a worker.
pub struct Connector {
    endpoint: Endpoint,
    /// Set when the host is an IP literal: no name resolution per connection.
    fixed_address: Option<SocketAddr>,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    connect_timeout: Duration,
    sources: Arc<SourceAddresses>,
}

/// The plan's `target.source_addresses`, taken in turn by every connection of the run (one
/// counter for all instances and workers, so the addresses share the connections evenly).
#[derive(Debug, Default)]
pub struct SourceAddresses {
    addresses: Vec<IpAddr>,
    next: AtomicUsize,
}

impl SourceAddresses {
    pub fn new(addresses: Vec<IpAddr>) -> Self {
        Self { addresses, next: AtomicUsize::new(0) }
    }

    fn next(&self) -> Option<IpAddr> {
        if self.addresses.is_empty() {
            return None;
        }
        // Relaxed: the counter only spreads connections; no other memory hangs on it.
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        Some(self.addresses[turn % self.addresses.len()])
    }
}

impl Connector {
    /// `extra_roots`: certificates (DER) trusted besides the usual roots (`target.ca_file`).
    /// `offer_h2`: ALPN offers h2 before http/1.1 (`target.http_version` "2" or "auto").
    pub fn new(
        endpoint: Endpoint,
        connect_timeout: Duration,
        insecure: bool,
        offer_h2: bool,
        extra_roots: &[CertificateDer<'static>],
        sources: Arc<SourceAddresses>,
    ) -> Result<Self, EngineError> {
        let fixed_address = endpoint.host.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, endpoint.port));
        let tls = match endpoint.scheme {
            Scheme::Http => None,
            Scheme::Https => {
                let server_name = ServerName::try_from(endpoint.host.clone()).map_err(|error| {
                    EngineError::Setup(format!("'{}' is not a valid TLS server name: {error}", endpoint.host))
                })?;
                Some((TlsConnector::from(Arc::new(tls_config(insecure, offer_h2, extra_roots)?)), server_name))
            }
        };
        Ok(Self { endpoint, fixed_address, tls, connect_timeout, sources })
    }

    /// Connects (and shakes hands, for https) within the connect timeout.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    pub async fn connect(&self) -> Result<Connection, ErrorKind> {
        self.connect_detailed().await.map_err(|(kind, _)| kind)
    }

    /// As [`Connector::connect`], with what went wrong in words on failure (the operating
    /// system's error and the address, the TLS reason): the error detail of the run.
    pub async fn connect_detailed(&self) -> Result<Connection, (ErrorKind, String)> {
        match tokio::time::timeout(self.connect_timeout, self.connect_unbounded()).await {
            Ok(result) => result,
            Err(_) => Err((
                ErrorKind::Timeout,
                format!(
                    "no connection to {}:{} within {} ms",
                    self.endpoint.host,
                    self.endpoint.port,
                    self.connect_timeout.as_millis()
                ),
            )),
        }
    }

    async fn connect_unbounded(&self) -> Result<Connection, (ErrorKind, String)> {
        let stream = match self.fixed_address {
            Some(address) => self.connect_to(address).await?,
            None => self.connect_by_name().await?,
        };
        // Requests are written in one buffer; waiting to coalesce would only add latency.
        stream.set_nodelay(true).map_err(|error| (ErrorKind::from_io(&error), error.to_string()))?;
        match &self.tls {
            None => Ok(Connection::Plain(stream)),
            Some((connector, server_name)) => {
                let tls_stream = connector.connect(server_name.clone(), stream).await.map_err(|error| {
                    let kind = match ErrorKind::from_io(&error) {
                        // A peer that hangs up mid-handshake is a reset, not a certificate problem.
                        ErrorKind::Reset | ErrorKind::Refused => ErrorKind::Reset,
                        _ => ErrorKind::Tls,
                    };
                    (kind, format!("TLS handshake with {}:{}: {error}", self.endpoint.host, self.endpoint.port))
                })?;
                Ok(Connection::Tls(Box::new(tls_stream)))
            }
        }
    }
}

impl Connector {
    /// Resolves the host and tries its addresses in order (a name such as `localhost` may give
    /// `::1` first while the target listens on 127.0.0.1 only).
    async fn connect_by_name(&self) -> Result<TcpStream, (ErrorKind, String)> {
        let host = self.endpoint.host.as_str();
        let addresses = tokio::net::lookup_host((host, self.endpoint.port))
            .await
            .map_err(|error| (ErrorKind::Dns, format!("cannot resolve '{host}': {error}")))?;
        let mut last_error = (ErrorKind::Dns, format!("'{host}' resolved to no address"));
        for address in addresses {
            match self.connect_to(address).await {
                Ok(stream) => return Ok(stream),
                Err(error) => last_error = error,
            }
        }
        Err(last_error)
    }

    /// One TCP connection, from the next source address when the plan lists some.
    /// The next of `target.source_addresses` in turn, if the plan gives any: a message
    /// target's UDP and KCP sockets bind to it.
    pub(crate) fn next_source(&self) -> Option<IpAddr> {
        self.sources.next()
    }

    /// A TCP connection to `address` from the next source address (if any): HTTP's, and a
    /// message target's TCP connections.
    pub(crate) async fn connect_to(&self, address: SocketAddr) -> Result<TcpStream, (ErrorKind, String)> {
        let failed = |error: io::Error| (ErrorKind::from_io(&error), format!("{error} to {address}"));
        let Some(source) = self.sources.next() else {
            return TcpStream::connect(address).await.map_err(failed);
        };
        // A source address that cannot be bound (not configured here, wrong family, ports
        // exhausted) fails this connection only: counted as a connect error, like a route
        // that does not exist.
        let socket = if address.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }.map_err(failed)?;
        // The port is then chosen at connect time for the whole 4-tuple, so one source
        // address is not limited to one ephemeral range for all targets together.
        crate::system::defer_port_choice(&socket);
        socket
            .bind(SocketAddr::new(source, 0))
            .map_err(|error| (ErrorKind::Connect, format!("cannot bind source address {source}: {error}")))?;
        socket.connect(address).await.map_err(failed)
    }
}

/// The certificates of a PEM file (`target.ca_file`), for the root store.
pub fn read_ca_file(path: &str) -> Result<Vec<CertificateDer<'static>>, EngineError> {
    use rustls::pki_types::pem::PemObject;
    let pem = std::fs::read(path)
        .map_err(|error| EngineError::Setup(format!("target.ca_file: cannot read '{path}': {error}")))?;
    let certificates = CertificateDer::pem_slice_iter(&pem).collect::<Result<Vec<_>, _>>().map_err(|error| {
        EngineError::Setup(format!("target.ca_file: '{path}' is not a PEM file of certificates: {error}"))
    })?;
    if certificates.is_empty() {
        return Err(EngineError::Setup(format!("target.ca_file: '{path}' holds no certificate")));
    }
    Ok(certificates)
}

fn tls_config(
    insecure: bool,
    offer_h2: bool,
    extra_roots: &[CertificateDer<'static>],
) -> Result<ClientConfig, EngineError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| EngineError::Setup(format!("TLS set-up failed: {error}")))?;
    let mut config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        for certificate in extra_roots {
            roots.add(certificate.clone()).map_err(|error| {
                EngineError::Setup(format!("target.ca_file: a certificate cannot be trusted: {error}"))
            })?;
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    // Both are offered even when the plan insists on HTTP/2: a server without h2 then still
    // completes the handshake, and the VU can say that it refused h2 (`h2_refused`) rather
    // than fail as a TLS error.
    config.alpn_protocols =
        if offer_h2 { vec![b"h2".to_vec(), b"http/1.1".to_vec()] } else { vec![b"http/1.1".to_vec()] };
    Ok(config)
}

/// The verifier behind `insecure: true`: the handshake still happens (so its cost is measured)
/// but any certificate is accepted.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            certificate,
            signature,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            certificate,
            signature,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
