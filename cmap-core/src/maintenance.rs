//! Background runs (spec: "Background Thread"): closing perished idle
//! connections and populating towards `minPoolSize`, when the timer table
//! (`timer.rs`) says a run is due or an input asks for one at once.

use crate::perish::PerishRules;
use crate::pool::{Pool, PoolState};

impl<C> Pool<C> {
    /// Asks for a background run at once (spec: after a clear, "the next
    /// background thread iteration" SHOULD be scheduled immediately).
    /// Without a maintenance interval, runs never happen.
    pub(crate) fn schedule_run_now(&mut self) {
        if self.options.maintenance_interval.is_some() && self.state != PoolState::Closed {
            self.next_run = Some(self.now);
        }
    }

    /// One background run: close perished available connections, then
    /// populate towards minPoolSize within maxConnecting. It never waits:
    /// whatever cannot be done now is left to the next run.
    pub(crate) fn run_background(&mut self) {
        self.next_run = self
            .options
            .maintenance_interval
            .and_then(|interval| self.now.checked_add(interval));
        let rules = PerishRules {
            now: self.now,
            generation: self.generation,
            services: &self.services,
            options: &self.options,
        };
        let perished = self
            .conns
            .extract_available(|meta| rules.perished(meta, true).is_some());
        for available in perished {
            let reason = self
                .perished(&available.meta, true)
                .expect("extracted as perished");
            self.close(&available.meta, available.conn, reason, None);
        }
        self.populate();
    }

    /// Starts connections towards minPoolSize, within maxConnecting and
    /// outside a backoff.
    pub(crate) fn populate(&mut self) {
        let min = self.options.min_pool_size as usize;
        while self.conns.total() < min && self.can_start_connection(false) {
            self.start_connection(None);
        }
    }
}
