//! [`PgManager`] as a manager of cmap-local pools (feature `local`): the
//! same sessions, set-up, check and reset as for cmap-tokio, with the
//! socket's task spawned on the current `LocalSet` (`spawn_local`), so a
//! pool per core needs no `Send` of the TLS connector's streams.

use std::future::Future;
use std::time::Instant;

use cmap_local::EstablishErrorKind;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::Socket;

use crate::manager::{Manager, Tokio};
use crate::{Address, PgConnection, PgError, PgManager};

impl<T> cmap_local::ManageConnection for Manager<T, Tokio>
where
    T: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
    T::Stream: 'static,
{
    type Connection = PgConnection;
    type Error = PgError;

    /// As for cmap-tokio, with the socket's task on this thread: call it
    /// inside a `LocalSet`.
    async fn connect(&self) -> Result<PgConnection, PgError> {
        let (client, connection) = self.config.connect(self.tls.clone()).await?;
        tokio::task::spawn_local(async move {
            let _ = connection.await;
        });
        self.set_up(client).await
    }

    fn classify(&self, error: &PgError) -> EstablishErrorKind {
        error.kind()
    }

    fn address(&self) -> Option<Address> {
        Some(PgManager::address(self))
    }

    fn check(
        &self,
        conn: &mut PgConnection,
        _deadline: Option<Instant>,
    ) -> impl Future<Output = Result<(), PgError>> {
        self.validate(conn)
    }

    fn reset(&self, conn: &mut PgConnection) -> impl Future<Output = Result<(), PgError>> {
        Self::reset_session(conn, self.reset)
    }

    fn is_broken(&self, conn: &mut PgConnection) -> bool {
        conn.touch_and_test()
    }
}
