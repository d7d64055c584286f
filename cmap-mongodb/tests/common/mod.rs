//! What the MongoDB tests share.
#![allow(dead_code)]

use cmap_mongodb::EstablishErrorKind;

/// A name no other test run uses (collections, application names).
pub fn unique(what: &str) -> String {
    format!("{what}_{}_{}", std::process::id(), fastrand::u32(..))
}

/// The kind the pool gave the establishment failure a checkout failed
/// with, if it failed so.
pub fn establish_kind(err: &dyn std::error::Error) -> Option<EstablishErrorKind> {
    let mut source = err.source();
    while let Some(error) = source {
        if let Some(mongo) = error.downcast_ref::<cmap_mongodb::Error>() {
            return Some(mongo.establish_kind());
        }
        source = error.source();
    }
    None
}
