//! `GetError`'s questions, on errors built by hand.

use std::sync::Arc;

use cmap_core::{Address, CheckOutError, ClearCause};

use cmap_async::GetError;

/// Only a cleared pool (or a labelled establishment error) is retried
/// as is: a closed pool, or a check that failed, is final.
#[test]
fn only_a_cleared_pool_is_retryable() {
    let address = Address::new("db", 27017);
    let cleared = GetError::CheckOut(CheckOutError::PoolCleared {
        address: address.clone(),
        cause: ClearCause::NeverReady,
    });
    let closed = GetError::CheckOut(CheckOutError::PoolClosed { address });
    let check = GetError::CheckFailed(Arc::new(std::io::Error::other("bad")));
    assert!(cleared.is_retryable());
    assert!(!closed.is_retryable());
    assert!(!check.is_retryable());
}
