//! Interrupted in-use connections (spec: `interruptInUseConnections`): the
//! set of connections the core asked to interrupt, and the future a guard
//! hands out to hear about it.
//!
//! The set changes only under the pool's lock (an `Interrupt` action
//! drained, a connection given back), so an id can never be added after its
//! connection came back: ids are never reused, and nothing leaks.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use cmap_core::{Address, ConnectionId, InterruptedError};
use event_listener::{Event, EventListener};

/// The interrupted connections of one pool, still checked out. Part of
/// the [driver layer](crate::driver).
#[derive(Default)]
pub struct Interrupts {
    ids: Mutex<BTreeSet<ConnectionId>>,
    /// How many ids the set holds, so a check-in skips the lock when none.
    len: AtomicUsize,
    event: Event,
}

impl Interrupts {
    fn lock(&self) -> MutexGuard<'_, BTreeSet<ConnectionId>> {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records interrupted connections; call `notify` afterwards.
    pub(crate) fn insert(&self, ids: &[ConnectionId]) {
        if ids.is_empty() {
            return;
        }
        let mut set = self.lock();
        set.extend(ids.iter().copied());
        self.len.store(set.len(), Ordering::Release);
    }

    /// Wakes every [`Interrupted`] future, which looks for its id.
    pub fn notify(&self) {
        self.event.notify(usize::MAX);
    }

    /// Forgets a connection given back or detached. Inlined: most pools
    /// never interrupt, and then this is one load.
    #[inline]
    pub fn forget(&self, id: ConnectionId) {
        if self.len.load(Ordering::Acquire) != 0 {
            self.remove(id);
        }
    }

    fn remove(&self, id: ConnectionId) {
        let mut set = self.lock();
        set.remove(&id);
        self.len.store(set.len(), Ordering::Release);
    }

    /// Whether connection `id` was interrupted while checked out.
    #[inline]
    pub fn contains(&self, id: ConnectionId) -> bool {
        self.len.load(Ordering::Acquire) != 0 && self.listed(id)
    }

    fn listed(&self, id: ConnectionId) -> bool {
        self.lock().contains(&id)
    }
}

/// Resolves when the pool interrupts this checked-out connection: a clear
/// with `interrupt_in_use` was called while it was in use (spec:
/// "interruptInUseConnections"). The connection already counts as closed;
/// fail the operation with the retryable [`InterruptedError`] it yields, and
/// drop the guard (the connection is then closed).
///
/// It borrows nothing, so it can race the operation that uses the guard:
///
/// ```
/// # use cmap_async::{ManageConnection, PooledConnection};
/// # async fn run<M: ManageConnection>(mut conn: PooledConnection<'_, M>) {
/// # let operation = async { () };
/// let interrupted = conn.interrupted();
/// // with tokio: tokio::select! { r = operation(&mut conn) => r, e = interrupted => Err(e) }
/// # drop((interrupted, operation));
/// # }
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct Interrupted {
    interrupts: Arc<Interrupts>,
    id: ConnectionId,
    address: Address,
    listener: Option<EventListener>,
}

impl Interrupted {
    pub(crate) fn new(interrupts: Arc<Interrupts>, id: ConnectionId, address: Address) -> Interrupted {
        Interrupted {
            interrupts,
            id,
            address,
            listener: None,
        }
    }
}

impl Future for Interrupted {
    type Output = InterruptedError;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<InterruptedError> {
        loop {
            if self.interrupts.contains(self.id) {
                return Poll::Ready(InterruptedError {
                    address: self.address.clone(),
                });
            }
            match self.listener.as_mut() {
                // Listen first, then look again: no notification is lost.
                None => self.listener = Some(self.interrupts.event.listen()),
                Some(listener) => {
                    if Pin::new(listener).poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    self.listener = None;
                }
            }
        }
    }
}

impl std::fmt::Debug for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interrupted")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_given_back_is_forgotten() {
        let interrupts = Interrupts::default();
        let (a, b) = (ConnectionId(1), ConnectionId(2));
        interrupts.insert(&[a, b]);
        assert!(interrupts.contains(a) && interrupts.contains(b));
        assert!(!interrupts.contains(ConnectionId(3)));
        interrupts.forget(a);
        assert!(!interrupts.contains(a) && interrupts.contains(b));
        interrupts.forget(b);
        assert_eq!(
            interrupts.len.load(Ordering::Acquire),
            0,
            "nothing left to look up"
        );
        assert!(interrupts.lock().is_empty());
    }
}
