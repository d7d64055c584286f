//! What every manager of this crate knows, whatever its runtime: the
//! options, the handshake's metadata, TLS, and the validation threshold.

use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Document};
use cmap_core::Address;
use rustls::pki_types::ServerName;

use crate::auth::Authenticator;
use crate::connection::Connection;
use crate::error::Error;
use crate::metadata::{client_metadata, DriverInfo};
use crate::options::{MongoOptions, OptionsError};
use crate::transport::Transport;

/// A manager's configuration, shared by the tokio and blocking managers.
pub(crate) struct Settings {
    pub(crate) options: MongoOptions,
    /// The handshake's `client` document, built once.
    pub(crate) metadata: Document,
    /// The rustls configuration and the server's name, with TLS on.
    pub(crate) tls: Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
    pub(crate) validate_idle_after: Option<Duration>,
    runtime: &'static str,
    wrappers: Vec<DriverInfo>,
}

impl Settings {
    /// Checks `options` and prepares what every connection needs;
    /// `runtime` names the runtime in the handshake's `platform`.
    pub(crate) fn new(options: MongoOptions, runtime: &'static str) -> Result<Settings, OptionsError> {
        options.validate()?;
        let tls = match &options.tls {
            Some(tls) => Some((
                crate::tls::client_config(tls)?,
                crate::tls::server_name(options.address.host())?,
            )),
            None => None,
        };
        let mut settings = Settings {
            options,
            metadata: Document::new(),
            tls,
            validate_idle_after: None,
            runtime,
            wrappers: Vec::new(),
        };
        settings.rebuild_metadata();
        Ok(settings)
    }

    pub(crate) fn add_driver_info(&mut self, info: DriverInfo) {
        self.wrappers.push(info);
        self.rebuild_metadata();
    }

    fn rebuild_metadata(&mut self) {
        let var = |name: &str| std::env::var(name).ok();
        let dockerenv = std::path::Path::new("/.dockerenv").exists();
        self.metadata = client_metadata(
            self.options.app_name.as_deref(),
            &self.wrappers,
            self.runtime,
            &var,
            dockerenv,
        );
    }

    pub(crate) fn address(&self) -> &Address {
        &self.options.address
    }

    /// The authentication of a new connection, if there is a credential.
    pub(crate) fn authenticator(&self) -> Result<Option<Authenticator<'_>>, Error> {
        self.options
            .credential
            .as_ref()
            .map(Authenticator::new)
            .transpose()
    }

    /// The check before a checkout: a broken connection is refused; one
    /// idle past the threshold is sent a `ping`.
    pub(crate) async fn check<T: Transport>(&self, conn: &mut Connection<T>) -> Result<(), Error> {
        if conn.is_broken() {
            return Err(Error::Broken);
        }
        if self
            .validate_idle_after
            .is_some_and(|idle| conn.last_used().elapsed() >= idle)
        {
            conn.run_command("admin", &doc! { "ping": 1 }).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::options::Credential;
    use crate::test_server::{block_on, FakeServer};

    use super::*;

    fn settings(options: MongoOptions) -> Settings {
        Settings::new(options, "tokio").unwrap()
    }

    #[test]
    fn the_metadata_names_the_runtime_and_each_wrapping_library() {
        let mut options = MongoOptions::new(Address::new("db", 27017));
        options.app_name = Some("shop".into());
        let mut settings = settings(options);
        assert_eq!(settings.address(), &Address::new("db", 27017));
        assert_eq!(settings.metadata.get_str("platform").ok(), Some("Rust, tokio"));
        assert_eq!(
            settings.metadata.get_document("application").ok(),
            Some(&doc! { "name": "shop" })
        );
        settings.add_driver_info(DriverInfo {
            name: "odm".into(),
            version: Some("2".into()),
            platform: None,
        });
        let driver = settings.metadata.get_document("driver").unwrap();
        assert_eq!(driver.get_str("name").ok(), Some("cmap-mongodb|odm"));
        assert_eq!(settings.metadata.get_str("platform").ok(), Some("Rust, tokio|"));
    }

    #[test]
    fn a_credential_makes_an_authenticator() {
        let mut options = MongoOptions::new(Address::new("db", 27017));
        assert!(settings(options.clone()).authenticator().unwrap().is_none());
        options.credential = Some(Credential::new("app", "secret", "shop"));
        let settings = settings(options);
        let auth = settings.authenticator().unwrap().expect("an authenticator");
        assert_eq!(auth.negotiation_name().as_deref(), Some("shop.app"));
    }

    #[test]
    fn the_check_refuses_a_broken_connection_and_pings_one_idle_past_the_threshold() {
        let mut settings = settings(MongoOptions::new(Address::new("db", 27017)));
        let mut conn = Connection::new(FakeServer::new(|_| doc! { "ok": 1.0 }), Address::new("db", 27017));
        block_on(settings.check(&mut conn)).unwrap();
        assert!(conn.transport_mut().received.is_empty(), "no threshold, no ping");

        settings.validate_idle_after = Some(Duration::from_secs(3600));
        block_on(settings.check(&mut conn)).unwrap();
        assert!(conn.transport_mut().received.is_empty(), "not idle long enough");

        settings.validate_idle_after = Some(Duration::ZERO);
        block_on(settings.check(&mut conn)).unwrap();
        let sent = &conn.transport_mut().received;
        assert_eq!(sent.as_slice(), &[doc! { "ping": 1, "$db": "admin" }]);

        conn.transport_mut().closed = true;
        assert!(matches!(block_on(settings.check(&mut conn)), Err(Error::Broken)));
        assert_eq!(
            conn.transport_mut().received.len(),
            1,
            "no ping on a broken connection"
        );
    }
}
