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
