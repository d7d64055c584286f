//! TLS with rustls (ring): the roots to trust, and the server's name.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};

use crate::options::{OptionsError, TlsOptions};

/// The client configuration for `options`: the certificates of its CA
/// file, or the Mozilla roots.
pub(crate) fn client_config(options: &TlsOptions) -> Result<Arc<ClientConfig>, OptionsError> {
    let mut roots = RootCertStore::empty();
    match &options.ca_file {
        Some(path) => add_ca_file(&mut roots, path)?,
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| OptionsError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

fn add_ca_file(roots: &mut RootCertStore, path: &Path) -> Result<(), OptionsError> {
    let unreadable = |reason: String| OptionsError::TlsCaFile {
        path: path.to_owned(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| unreadable(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unreadable(e.to_string()))?;
    if certs.is_empty() {
        return Err(unreadable("it holds no PEM certificate".to_owned()));
    }
    for cert in certs {
        roots.add(cert).map_err(|e| unreadable(e.to_string()))?;
    }
    Ok(())
}

/// The name the server's certificate must carry: the host of its address
/// (an IPv6 address without its brackets).
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, OptionsError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(bare.to_owned())
        .map_err(|e| OptionsError::Tls(format!("{host:?} is not a TLS server name: {e}")))
}

/// The certificate error inside an I/O error of a TLS handshake, if it is
/// one: rustls reports refusals of the server as `InvalidData` wrapping a
/// [`rustls::Error`]; anything else is a network error.
pub(crate) fn refusal(error: &std::io::Error) -> Option<rustls::Error> {
    error.get_ref()?.downcast_ref::<rustls::Error>().cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mozilla_roots_are_the_default_and_a_bad_ca_file_is_named() {
        assert!(client_config(&TlsOptions::default()).is_ok());
        let missing = TlsOptions {
            ca_file: Some("/nonexistent/ca.pem".into()),
        };
        let err = client_config(&missing).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
        let dir = std::env::temp_dir().join(format!("cmap-mongodb-tls-{}", std::process::id()));
        std::fs::write(&dir, "not a certificate").unwrap();
        let empty = TlsOptions {
            ca_file: Some(dir.clone()),
        };
        let err = client_config(&empty).unwrap_err();
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
        std::fs::remove_file(dir).unwrap();
    }

    #[test]
    fn a_certificate_refusal_is_found_inside_the_io_error() {
        // rustls reports a refused certificate as InvalidData wrapping its
        // error: that is a TLS refusal (not retried), anything else a
        // network error.
        let refused = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, refused.clone());
        assert_eq!(refusal(&io), Some(refused));
        assert_eq!(
            refusal(&std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
            None
        );
        assert_eq!(refusal(&std::io::Error::other("not TLS")), None);
    }

    #[test]
    fn server_names_drop_ipv6_brackets() {
        assert!(server_name("db.example").is_ok());
        assert!(server_name("[::1]").is_ok());
        assert!(server_name("127.0.0.1").is_ok());
        assert!(server_name("bad name").is_err());
    }
}
