//! Spec: "Perishable". A connection is perished when it is errored, stale
//! (its generation is not the pool's, or its service's in load-balanced
//! mode), idle (available for longer than maxIdleTimeMS), or, as an
//! extension, past its maximum lifetime.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::connection::{Meta, ServiceId};
use crate::event::ClosedReason;
use crate::options::PoolOptions;
use crate::pool::ServiceGeneration;

/// The perishable rules, applied at one instant against the pool's state
/// (its generation, the services' generations, the options): what makes a
/// connection perished, and why. It borrows only what it needs, so it can
/// be used while the connection set is being changed.
pub(crate) struct PerishRules<'a> {
    pub(crate) now: Instant,
    pub(crate) generation: u32,
    pub(crate) services: &'a BTreeMap<ServiceId, ServiceGeneration>,
    pub(crate) options: &'a PoolOptions,
}

impl PerishRules<'_> {
    /// Why `meta` is perished, if it is. `available` says whether the idle
    /// rule applies (it does not to a connection being checked in).
    #[inline]
    pub(crate) fn perished(&self, meta: &Meta, available: bool) -> Option<ClosedReason> {
        if meta.errored {
            return Some(ClosedReason::Error);
        }
        if self.is_stale(meta.generation, meta.service_id) {
            return Some(ClosedReason::Stale);
        }
        if available
            && self
                .options
                .max_idle_time
                .is_some_and(|max| self.now.saturating_duration_since(meta.last_used) > max)
        {
            return Some(ClosedReason::Idle);
        }
        if meta.expires_at.is_some_and(|end| self.now >= end) {
            return Some(ClosedReason::Lifetime);
        }
        None
    }

    #[inline]
    pub(crate) fn is_stale(&self, generation: u32, service_id: Option<ServiceId>) -> bool {
        match service_id {
            Some(service) if self.options.load_balanced => self
                .services
                .get(&service)
                .is_some_and(|s| s.generation != generation),
            _ => generation != self.generation,
        }
    }
}
