//! HTTPS for the built-in target (`horde target --tls`): rustls over the accepted TCP stream,
//! ALPN offering h2 then http/1.1, and the same hyper service behind it (hyper-util's auto
//! builder reads HTTP/2's preface after the handshake as it does in clear text).

use crate::config::{TargetError, TargetTls};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;

/// A self-signed certificate for `names` (host names or IP addresses), made now: a client
/// trusts it by its PEM (the engine's `target.ca_file`) or not at all (`target.insecure`).
///
/// # Errors
///
/// [`TargetError::InvalidConfig`] when a name cannot go in a certificate.
pub fn self_signed(names: &[String]) -> Result<TargetTls, TargetError> {
    let certified = rcgen::generate_simple_self_signed(names.to_vec())
        .map_err(|error| TargetError::InvalidConfig(format!("a self-signed certificate for {names:?}: {error}")))?;
    Ok(TargetTls { certificate_pem: certified.cert.pem(), key_pem: certified.signing_key.serialize_pem() })
}

/// The acceptor for `tls`'s certificate and key, offering h2 and http/1.1 in ALPN.
pub(crate) fn acceptor(tls: &TargetTls) -> Result<tokio_rustls::TlsAcceptor, TargetError> {
    let invalid =
        |what: &str, error: &dyn std::fmt::Display| TargetError::InvalidConfig(format!("the TLS {what}: {error}"));
    let chain = CertificateDer::pem_slice_iter(tls.certificate_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| invalid("certificate", &error))?;
    if chain.is_empty() {
        return Err(TargetError::InvalidConfig("the TLS certificate: no PEM certificate found".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(tls.key_pem.as_bytes()).map_err(|error| invalid("key", &error))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| invalid("protocol versions", &error))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|error| invalid("certificate and key", &error))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}
