//! The testing kit (`cmap_core::testing`, feature `proptest`) run as a
//! driver author would run it: random cases through its harness, every
//! check after every input, a deterministic re-run and an exact replay.
//! Then a property of a driver of one's own: the kit's books kept beside
//! the driver's state, here a count of the connections it was handed.

use std::convert::Infallible;
use std::time::Instant;

use cmap_core::testing::{self, strategy, Books, KeepsBooks};
use cmap_core::virtual_time::{self, VirtualDriver};
use cmap_core::{Action, Address, HandleError, Handled, Output, Pool};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_case_keeps_the_books_and_replays(case in strategy::case(96)) {
        testing::run(&case, origin());
    }

    #[test]
    fn a_driver_of_ones_own_is_handed_each_connection_once(
        options in strategy::options(),
        steps in proptest::collection::vec(strategy::step(), 0..96),
    ) {
        let Some(options) = options.build() else { return Ok(()) };
        let now = origin();
        let mut driver = Counting {
            pool: Pool::new(now, Address::new("mine", 27017), options),
            now,
            books: Books::default(),
            handed: Vec::new(),
        };
        let Ok(()) = virtual_time::drain(&mut driver);
        for step in steps {
            let Ok(()) = testing::step(&mut driver, step);
            // The driver's own property: no connection is handed to two
            // checkouts while it is out.
            let mut ids: Vec<_> = driver.handed.clone();
            ids.sort_unstable();
            ids.dedup();
            prop_assert_eq!(ids.len(), driver.handed.len());
            driver.handed.clear();
        }
    }
}

/// Where virtual time starts: the one real clock reading of a run.
#[allow(clippy::disallowed_methods)]
fn origin() -> Instant {
    Instant::now()
}

/// A driver that counts what it is handed by action within one input,
/// beside the kit's books, which `testing::step` keeps (`KeepsBooks`).
struct Counting {
    pool: Pool<u64>,
    now: Instant,
    books: Books,
    handed: Vec<u64>,
}

impl VirtualDriver<u64> for Counting {
    type Error = Infallible;

    fn pool(&mut self) -> &mut Pool<u64> {
        &mut self.pool
    }

    fn clock(&mut self) -> &mut Instant {
        &mut self.now
    }

    fn answered(&mut self, answer: Result<Handled<u64>, HandleError<u64>>) -> Result<(), Infallible> {
        self.books.answered(answer);
        Ok(())
    }

    fn perform(&mut self, output: Output<u64>) -> Result<(), Infallible> {
        if let Output::Action(action) = output {
            if let Action::Deliver { connection, .. } = &action {
                self.handed.push(connection.id().0);
            }
            self.books.perform(action);
        }
        Ok(())
    }

    fn settled(&mut self) -> Result<(), Infallible> {
        self.books.check(&self.pool);
        Ok(())
    }
}

impl KeepsBooks for Counting {
    fn books(&mut self) -> &mut Books {
        &mut self.books
    }
}
