//! Virtual time: the one loop that drives a pool on a clock of the
//! driver's own, for tests, simulations, fuzzing and replay. A driver on
//! virtual time says what its pool and clock are and how it carries out an
//! output ([`VirtualDriver`]); [`apply`], [`drain`] and [`advance`] do the
//! rest, the same way for all of them: one input at the clock's instant,
//! every output performed in order, and the timer fired at every deadline
//! the clock passes (quinn-proto's test pair keeps its clock so).
//!
//! Nothing here reads a clock: the driver moves its own.

use std::time::Instant;

use crate::input::{HandleError, Handled, Input};
use crate::output::Output;
use crate::pool::Pool;

/// A driver of a [`Pool`] on virtual time: what [`apply`], [`drain`] and
/// [`advance`] need of it.
pub trait VirtualDriver<C> {
    /// Why the driver stops: an output its books did not expect, a check
    /// that failed after an input.
    type Error;

    /// The pool it drives.
    fn pool(&mut self) -> &mut Pool<C>;

    /// Its clock: inputs are applied at this instant, and [`advance`]
    /// moves it.
    fn clock(&mut self) -> &mut Instant;

    /// Carries out one output, as a real driver would (start a connect,
    /// hand a connection to a waiter, note an event...).
    ///
    /// # Errors
    ///
    /// Whatever stops the driver.
    fn perform(&mut self, output: Output<C>) -> Result<(), Self::Error>;

    /// Takes the pool's answer to an input [`apply`] gave it, before its
    /// outputs are performed (a checkout's id is in the books before its
    /// `Deliver` comes). Drops it unless the driver says.
    ///
    /// # Errors
    ///
    /// Whatever stops the driver (an input its books say is valid, refused).
    fn answered(&mut self, answer: Result<Handled<C>, HandleError<C>>) -> Result<(), Self::Error> {
        drop(answer);
        Ok(())
    }

    /// Called once every output of an input is performed: the place for
    /// checks after every step. Does nothing unless the driver says.
    ///
    /// # Errors
    ///
    /// Whatever stops the driver.
    fn settled(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// Applies `input` at the driver's clock, hands the pool's answer to
/// [`answered`](VirtualDriver::answered), then [`drain`]s what it caused.
///
/// # Errors
///
/// The driver's error, from [`VirtualDriver::answered`],
/// [`VirtualDriver::perform`] or [`VirtualDriver::settled`].
pub fn apply<C, D>(driver: &mut D, input: Input<C>) -> Result<(), D::Error>
where
    D: VirtualDriver<C> + ?Sized,
{
    let now = *driver.clock();
    let answer = driver.pool().handle(now, input);
    driver.answered(answer)?;
    drain(driver)
}

/// Performs every output the pool holds, in order, then says the driver
/// has [`settled`](VirtualDriver::settled).
///
/// # Errors
///
/// The driver's error, at the first output it refuses.
///
/// # Panics
///
/// If [`Pool::has_output`] announces an output that does not come, or
/// one comes unannounced: a real driver that skips its drain on
/// `has_output` would lose it.
pub fn drain<C, D>(driver: &mut D) -> Result<(), D::Error>
where
    D: VirtualDriver<C> + ?Sized,
{
    loop {
        let announced = driver.pool().has_output();
        let Some(output) = driver.pool().poll_output() else {
            assert!(!announced, "has_output() announced an output that never came");
            break;
        };
        assert!(announced, "an output came that has_output() did not announce");
        driver.perform(output)?;
    }
    driver.settled()
}

/// Moves the driver's clock to `until`, firing the timer at every deadline
/// on the way (with the deadline as the clock's time, as a driver whose
/// sleep wakes on time passes), each firing drained. Returns how many
/// times the timer fired. A clock already past `until` stays.
///
/// # Errors
///
/// The driver's error, from a drain.
///
/// # Panics
///
/// If the pool leaves a deadline due after its timer fired at it: the loop
/// would never end, and that is a bug of the pool.
pub fn advance<C, D>(driver: &mut D, until: Instant) -> Result<usize, D::Error>
where
    D: VirtualDriver<C> + ?Sized,
{
    let mut fired = 0;
    while let Some(deadline) = driver.pool().poll_timeout().filter(|d| *d <= until) {
        let now = (*driver.clock()).max(deadline);
        *driver.clock() = now;
        driver.pool().handle_timeout(now);
        if let Some(next) = driver.pool().poll_timeout() {
            assert!(
                next > now,
                "the timer fired at {now:?} and left a deadline that is due ({next:?})"
            );
        }
        fired += 1;
        drain(driver)?;
    }
    let clock = driver.clock();
    *clock = (*clock).max(until);
    Ok(fired)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{advance, apply, VirtualDriver};
    use crate::{Action, Address, Input, Output, Pool, PoolOptions};

    /// Notes the instant of every timeout-failed checkout.
    struct Timeouts {
        pool: Pool<()>,
        now: Instant,
        failed_at: Vec<Instant>,
    }

    impl VirtualDriver<()> for Timeouts {
        type Error = ();
        fn pool(&mut self) -> &mut Pool<()> {
            &mut self.pool
        }
        fn clock(&mut self) -> &mut Instant {
            &mut self.now
        }
        fn perform(&mut self, output: Output<()>) -> Result<(), ()> {
            if let Output::Action(Action::Fail { .. }) = output {
                self.failed_at.push(self.now);
            }
            Ok(())
        }
    }

    /// Two checkouts that nobody serves time out each at its own deadline,
    /// not at the end of the stretch the clock moves.
    #[test]
    fn the_timer_fires_at_every_deadline_on_the_way() {
        let t0 = crate::test_clock::origin();
        let options = PoolOptions::builder()
            .max_pool_size(1)
            .maintenance_interval(None)
            .build()
            .unwrap();
        let mut d = Timeouts {
            pool: Pool::new(t0, Address::new("h", 1), options),
            now: t0,
            failed_at: Vec::new(),
        };
        apply(&mut d, Input::Ready).unwrap();
        let ms = Duration::from_millis;
        for deadline in [ms(10), ms(30)] {
            let deadline = Some(t0 + deadline);
            apply(
                &mut d,
                Input::CheckOut {
                    deadline,
                    direct: false,
                },
            )
            .unwrap();
        }
        // One connection, for the first: both wait.
        assert_eq!(d.pool.status().waiting, 2);
        assert_eq!(advance(&mut d, t0 + ms(100)), Ok(2));
        assert_eq!(d.failed_at, [t0 + ms(10), t0 + ms(30)]);
        assert_eq!(d.now, t0 + ms(100));
    }
}
