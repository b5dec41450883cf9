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

    pub async fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self {
            Connection::Plain(stream) => stream.read(buffer).await,
            Connection::Tls(stream) => stream.read(buffer).await,
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
    pub fn new(endpoint: Endpoint, connect_timeout: Duration, insecure: bool, sources: Arc<SourceAddresses>) -> Result<Self, EngineError> {
        let fixed_address = endpoint.host.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, endpoint.port));
        let tls = match endpoint.scheme {
            Scheme::Http => None,
            Scheme::Https => {
                let server_name = ServerName::try_from(endpoint.host.clone())
                    .map_err(|error| EngineError::Setup(format!("'{}' is not a valid TLS server name: {error}", endpoint.host)))?;
                Some((TlsConnector::from(Arc::new(tls_config(insecure)?)), server_name))
            }
        };
        Ok(Self { endpoint, fixed_address, tls, connect_timeout, sources })
    }

    /// Connects (and shakes hands, for https) within the connect timeout.
    pub async fn connect(&self) -> Result<Connection, ErrorKind> {
        match tokio::time::timeout(self.connect_timeout, self.connect_unbounded()).await {
            Ok(result) => result,
            Err(_) => Err(ErrorKind::Timeout),
        }
    }

    async fn connect_unbounded(&self) -> Result<Connection, ErrorKind> {
        let stream = match self.fixed_address {
            Some(address) => self.connect_to(address).await?,
            None => self.connect_by_name().await?,
        };
        // Requests are written in one buffer; waiting to coalesce would only add latency.
        stream.set_nodelay(true).map_err(|error| ErrorKind::from_io(&error))?;
        match &self.tls {
            None => Ok(Connection::Plain(stream)),
            Some((connector, server_name)) => {
                let tls_stream = connector.connect(server_name.clone(), stream).await.map_err(|error| {
                    match ErrorKind::from_io(&error) {
                        // A peer that hangs up mid-handshake is a reset, not a certificate problem.
                        ErrorKind::Reset | ErrorKind::Refused => ErrorKind::Reset,
                        _ => ErrorKind::Tls,
                    }
                })?;
                Ok(Connection::Tls(Box::new(tls_stream)))
            }
        }
    }
}

impl Connector {
    /// Resolves the host and tries its addresses in order (a name such as `localhost` may give
    /// `::1` first while the target listens on 127.0.0.1 only).
    async fn connect_by_name(&self) -> Result<TcpStream, ErrorKind> {
        let addresses = tokio::net::lookup_host((self.endpoint.host.as_str(), self.endpoint.port))
            .await
            .map_err(|_| ErrorKind::Dns)?;
        let mut last_error = ErrorKind::Dns;
        for address in addresses {
            match self.connect_to(address).await {
                Ok(stream) => return Ok(stream),
                Err(kind) => last_error = kind,
            }
        }
        Err(last_error)
    }

    /// One TCP connection, from the next source address when the plan lists some.
    async fn connect_to(&self, address: SocketAddr) -> Result<TcpStream, ErrorKind> {
        let Some(source) = self.sources.next() else {
            return TcpStream::connect(address).await.map_err(|error| ErrorKind::from_io(&error));
        };
        // A source address that cannot be bound (not configured here, wrong family, ports
        // exhausted) fails this connection only: counted as a connect error, like a route
        // that does not exist.
        let socket = if address.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }.map_err(|error| ErrorKind::from_io(&error))?;
        // The port is then chosen at connect time for the whole 4-tuple, so one source
        // address is not limited to one ephemeral range for all targets together.
        crate::system::defer_port_choice(&socket);
        socket.bind(SocketAddr::new(source, 0)).map_err(|_| ErrorKind::Connect)?;
        socket.connect(address).await.map_err(|error| ErrorKind::from_io(&error))
    }
}

fn tls_config(insecure: bool) -> Result<ClientConfig, EngineError> {
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
        let roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
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
        rustls::crypto::verify_tls12_signature(message, certificate, signature, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, certificate, signature, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
