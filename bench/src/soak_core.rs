//! `bench soak-core --hours 24 [--seed S]` (issue 34): one
//! `cmap_core::Pool`, on virtual time, fed random inputs for that many
//! virtual hours, with `Pool::check_invariants` after every input and the
//! driver's own books (checkouts waiting, connections being established,
//! connections in use) checked against the pool's status; it stops at the
//! first thing wrong and says which input it was.
//!
//! The inputs, drawn from the seed (`crate::fleet::rng`): checkouts (with
//! the pool's 5 s wait timeout, or a deadline of 0 to 50 ms), check-ins
//! (1 in 50 marked errored), detaches, establishments that succeed or fail
//! (network errors, which carry backpressure labels, and other errors,
//! which clear the pool), cancelled checkouts, clears (some interrupting
//! connections in use), ready, resizes, spurious timer wake-ups, and time
//! passing (exponential, mean 20 ms), the timer fired at every deadline on
//! the way as a driver whose sleep wakes on time. The pool's options:
//! maxPoolSize 10, minPoolSize 2, maxConnecting 2, a 5 s wait timeout,
//! maxIdleTime 60 s, a 30 min lifetime with 20 % jitter, the default
//! reconnect backoff. The driver is the one of `cmap-core/fuzz` (its
//! books, its checks), written again here for one long run, on
//! cmap-core's virtual-time loop (`cmap_core::virtual_time`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use cmap_core::virtual_time::{self, VirtualDriver};
use cmap_core::{
    Action, Address, CheckOut, Clear, ConnectionId, EstablishError, EstablishErrorKind, HandleError, Handled,
    Input, Output, Pool, PoolOptions, Pooled, Reconnect, WaiterId,
};

use crate::fleet::rng::Rng;

pub const HELP: &str = "\
usage: bench soak-core [--hours 24] [--seed 1]

cmap-core's pool on virtual time for that many hours: random inputs, the pool's invariants and the
driver's books checked after each one; prints the counts.
";

/// What the run counted.
#[derive(Default, Debug)]
struct Counts {
    inputs: u64,
    timer_fired: u64,
    check_outs: u64,
    delivered: u64,
    failed: u64,
    cancelled: u64,
    check_ins: u64,
    errored_check_ins: u64,
    detached: u64,
    established: u64,
    establish_failed: u64,
    clears: u64,
    readies: u64,
    resizes: u64,
    closed: u64,
    interrupted: u64,
    aborted: u64,
    most_waiting: usize,
    most_total: usize,
}

struct Driver {
    pool: Pool<u64>,
    now: Instant,
    in_use: Vec<Pooled<u64>>,
    interrupted: BTreeSet<ConnectionId>,
    pending: Vec<ConnectionId>,
    aborted: Vec<ConnectionId>,
    waiting: Vec<WaiterId>,
    made: u64,
    counts: Counts,
}

fn take<T>(v: &mut Vec<T>, rng: &mut Rng) -> Option<T> {
    (!v.is_empty()).then(|| v.swap_remove((rng.next_u64() % v.len() as u64) as usize))
}

impl Driver {
    fn new(now: Instant, seed: u64) -> Result<Driver, String> {
        let options = PoolOptions::builder()
            .max_pool_size(10)
            .min_pool_size(2)
            .max_connecting(2)
            .wait_queue_timeout(Duration::from_secs(5))
            .max_idle_time(Some(Duration::from_secs(60)))
            .max_lifetime(Duration::from_secs(1800), 0.2)
            .reconnect(Some(Reconnect::default()))
            .seed(seed)
            .build()
            .map_err(|e| e.to_string())?;
        let mut d = Driver {
            pool: Pool::new(now, Address::new("soak", 5432), options),
            now,
            in_use: Vec::new(),
            interrupted: BTreeSet::new(),
            pending: Vec::new(),
            aborted: Vec::new(),
            waiting: Vec::new(),
            made: 0,
            counts: Counts::default(),
        };
        d.apply(Input::Ready)?;
        Ok(d)
    }

    /// One random input, applied and drained by cmap-core's virtual-time
    /// loop, which checks the books after it (`settled`).
    fn step(&mut self, rng: &mut Rng) -> Result<&'static str, String> {
        let now = self.now;
        let roll = rng.unit();
        let (what, input) = if roll < 0.25 {
            let by = Duration::from_secs_f64(rng.exp(0.020));
            self.counts.timer_fired += virtual_time::advance(self, now + by)? as u64;
            ("advance", None)
        } else if roll < 0.45 {
            self.counts.check_outs += 1;
            let deadline = if rng.unit() < 0.1 {
                Some(now + Duration::from_secs_f64(rng.unit() * 0.050))
            } else {
                self.pool.options().wait_queue_timeout().map(|t| now + t)
            };
            let direct = false;
            ("check out", Some(Input::CheckOut { deadline, direct }))
        } else if roll < 0.65 {
            let input = take(&mut self.in_use, rng).map(|mut conn| {
                self.interrupted.remove(&conn.id());
                if rng.unit() < 0.02 {
                    conn.mark_errored();
                    self.counts.errored_check_ins += 1;
                }
                self.counts.check_ins += 1;
                Input::CheckIn(conn)
            });
            ("check in", input)
        } else if roll < 0.80 {
            let input = self.take_establishing(rng).map(|id| {
                self.made += 1;
                self.counts.established += 1;
                Input::Established {
                    id,
                    connection: self.made,
                    service_id: None,
                }
            });
            ("established", input)
        } else if roll < 0.83 {
            let input = self.take_establishing(rng).map(|id| {
                let kind = if rng.unit() < 0.9 {
                    EstablishErrorKind::Network
                } else {
                    EstablishErrorKind::Other
                };
                self.counts.establish_failed += 1;
                let error = EstablishError::new(kind, std::io::Error::other("soak: connect failed"));
                Input::EstablishFailed { id, error }
            });
            ("establish failed", input)
        } else if roll < 0.86 {
            let input = take(&mut self.waiting, rng).map(|id| {
                self.counts.cancelled += 1;
                Input::Cancel(id)
            });
            ("cancel", input)
        } else if roll < 0.87 {
            let input = take(&mut self.in_use, rng).map(|conn| {
                self.interrupted.remove(&conn.id());
                self.counts.detached += 1;
                Input::Detach(conn)
            });
            ("detach", input)
        } else if roll < 0.8702 {
            self.counts.clears += 1;
            let clear = Clear {
                interrupt_in_use: rng.unit() < 0.5,
                ..Clear::default()
            };
            ("clear", Some(Input::Clear(clear)))
        } else if roll < 0.88 {
            self.counts.readies += 1;
            ("ready", Some(Input::Ready))
        } else if roll < 0.8802 {
            self.counts.resizes += 1;
            let min = (rng.next_u64() % 4) as u32;
            let max = 4 + (rng.next_u64() % 12) as u32;
            ("resize", Some(Input::Resize { min, max }))
        } else {
            ("timeout", Some(Input::Timeout))
        };
        self.counts.inputs += 1;
        match input {
            Some(input) => self.apply(input).map_err(|e| format!("{what}: {e}"))?,
            None => virtual_time::drain(self)?,
        }
        Ok(what)
    }

    /// Applies `input`; a timer firing must leave no deadline due.
    fn apply(&mut self, input: Input<u64>) -> Result<(), String> {
        let timer = matches!(input, Input::Timeout);
        virtual_time::apply(self, input)?;
        match self.pool.poll_timeout() {
            Some(next) if timer && next <= self.now => {
                Err("handle_timeout left a deadline that is due".to_owned())
            }
            _ => Ok(()),
        }
    }

    fn take_establishing(&mut self, rng: &mut Rng) -> Option<ConnectionId> {
        let n = self.pending.len() + self.aborted.len();
        if n == 0 {
            return None;
        }
        let i = (rng.next_u64() % n as u64) as usize;
        Some(if i < self.pending.len() {
            self.pending.swap_remove(i)
        } else {
            self.aborted.swap_remove(i - self.pending.len())
        })
    }

    fn served(&mut self, waiter: WaiterId) -> Result<(), String> {
        let at = self.waiting.iter().position(|w| *w == waiter);
        let at = at.ok_or_else(|| format!("{waiter} served or failed, but it does not wait"))?;
        self.waiting.swap_remove(at);
        Ok(())
    }
}

/// The soak on cmap-core's virtual-time loop: the driver's books move
/// with every output, and are checked after every input.
impl VirtualDriver<u64> for Driver {
    type Error = String;

    fn pool(&mut self) -> &mut Pool<u64> {
        &mut self.pool
    }

    fn clock(&mut self) -> &mut Instant {
        &mut self.now
    }

    /// Every input of the soak is valid by the books: a refusal is an
    /// error. A checkout's id goes in the books before its outcome comes.
    fn answered(&mut self, answer: Result<Handled<u64>, HandleError<u64>>) -> Result<(), String> {
        match answer {
            Ok(Handled::CheckOut(CheckOut::Later(id))) => self.waiting.push(id),
            Ok(Handled::CheckOut(CheckOut::Ready(conn))) => self.in_use.push(conn),
            Ok(_) => {}
            Err(e) => return Err(format!("refused: {e:?}")),
        }
        Ok(())
    }

    fn perform(&mut self, output: Output<u64>) -> Result<(), String> {
        let Output::Action(action) = output else {
            return Ok(());
        };
        match action {
            Action::Establish { id } => {
                if self.pending.contains(&id) {
                    return Err(format!("{id} established twice"));
                }
                self.pending.push(id);
            }
            Action::AbortEstablish { id } => {
                let at = self.pending.iter().position(|p| *p == id);
                let at = at.ok_or_else(|| format!("abort of {id}, which is not being established"))?;
                self.aborted.push(self.pending.swap_remove(at));
                self.counts.aborted += 1;
            }
            Action::Deliver { waiter, connection } => {
                self.served(waiter)?;
                self.counts.delivered += 1;
                self.in_use.push(connection);
            }
            Action::Fail { waiter, .. } => {
                self.served(waiter)?;
                self.counts.failed += 1;
            }
            Action::Close { .. } => self.counts.closed += 1,
            Action::Interrupt { id } => {
                if !self.in_use.iter().any(|c| c.id() == id) {
                    return Err(format!("interrupt of {id}, which is not in use"));
                }
                self.interrupted.insert(id);
                self.counts.interrupted += 1;
            } // `Action` is `#[non_exhaustive]` outside cmap-core: a new
              // one stops the soak until it is handled here.
        }
        Ok(())
    }

    fn settled(&mut self) -> Result<(), String> {
        self.pool
            .check_invariants()
            .map_err(|broken| format!("invariant broken: {broken}"))?;
        let status = self.pool.status();
        let in_use = self
            .in_use
            .iter()
            .filter(|c| !self.interrupted.contains(&c.id()))
            .count();
        if status.waiting != self.waiting.len()
            || status.pending != self.pending.len()
            || status.in_use != in_use
        {
            return Err(format!(
                "the books disagree: waiting {} / {}, pending {} / {}, in use {} / {} (pool / driver)",
                status.waiting,
                self.waiting.len(),
                status.pending,
                self.pending.len(),
                status.in_use,
                in_use
            ));
        }
        self.counts.most_waiting = self.counts.most_waiting.max(status.waiting);
        self.counts.most_total = self.counts.most_total.max(status.total);
        Ok(())
    }
}

/// One soak of `hours` virtual hours from `base`; stops at the first
/// thing wrong.
fn soak(base: Instant, seed: u64, hours: f64, progress: bool) -> Result<Driver, String> {
    let began = Instant::now();
    let end = base + Duration::from_secs_f64(hours * 3600.0);
    let mut rng = Rng::new(seed);
    let mut d = Driver::new(base, seed)?;
    let mut next_report = base + Duration::from_secs(3600);
    while d.now < end {
        if let Err(e) = d.step(&mut rng) {
            return Err(format!(
                "soak-core, seed {seed}: after {} inputs, at {:.3} virtual s: {e}",
                d.counts.inputs,
                (d.now - base).as_secs_f64()
            ));
        }
        if progress && d.now >= next_report {
            eprintln!(
                "  {:>4.0} virtual h, {} inputs, {:.0} s",
                (d.now - base).as_secs_f64() / 3600.0,
                d.counts.inputs,
                began.elapsed().as_secs_f64()
            );
            next_report += Duration::from_secs(3600);
        }
    }
    Ok(d)
}

pub fn run(args: &[String]) -> Result<(), String> {
    let mut hours = 24.0f64;
    let mut seed = 1u64;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--hours" => hours = value()?.parse().map_err(|_| "--hours: a number".to_owned())?,
            "--seed" => seed = value()?.parse().map_err(|_| "--seed: a number".to_owned())?,
            "--help" => {
                print!("{HELP}");
                return Ok(());
            }
            _ => return Err(format!("unknown option {arg}\n\n{HELP}")),
        }
    }
    let began = Instant::now();
    let base = Instant::now();
    let d = soak(base, seed, hours, true)?;
    let once = began.elapsed();
    // The same seed again, at the same instants: the same pool, to the
    // last counter (the core is deterministic).
    let again = soak(base, seed, hours, false)?;
    if format!("{:?}{:?}", d.counts, d.pool.stats()) != format!("{:?}{:?}", again.counts, again.pool.stats())
    {
        return Err(format!(
            "soak-core, seed {seed}: a second run of the same inputs ended elsewhere"
        ));
    }
    let stats = d.pool.stats();
    let status = d.pool.status();
    let c = &d.counts;
    println!(
        "soak-core, seed {seed}: {hours} virtual hours in {:.1} s of wall time; every invariant and the driver's books held \
         after each of {} inputs and {} timer firings; a second run of the same seed ended with the same counts.\n",
        once.as_secs_f64(),
        c.inputs,
        c.timer_fired
    );
    println!("| what | count |\n| --- | --: |");
    for (what, n) in [
        ("inputs", c.inputs),
        ("timer firings (deadlines on the way)", c.timer_fired),
        ("checkouts", c.check_outs),
        ("of them served", c.delivered),
        ("of them failed (timed out, cleared)", c.failed),
        ("of them cancelled", c.cancelled),
        ("check-ins", c.check_ins),
        ("errored check-ins", c.errored_check_ins),
        ("detached", c.detached),
        ("establishments succeeded", c.established),
        ("establishments failed", c.establish_failed),
        ("establishments aborted", c.aborted),
        ("connections closed", c.closed),
        ("in-use connections interrupted", c.interrupted),
        ("clears", c.clears),
        ("ready inputs", c.readies),
        ("resizes", c.resizes),
        ("checkouts waiting at most", c.most_waiting as u64),
        ("connections at most", c.most_total as u64),
        ("pool's count: requests", stats.requests),
        ("pool's count: timed out", stats.requests_timed_out),
        ("pool's count: connections opened", stats.connections_opened),
        ("pool's count: connections closed", stats.connections_closed),
    ] {
        println!("| {what} | {n} |");
    }
    println!(
        "\nat the end: {:?}, total {}, available {}, pending {}, in use {}, waiting {}",
        status.state, status.total, status.available, status.pending, status.in_use, status.waiting
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Six virtual minutes: every kind of input comes up, nothing breaks.
    #[test]
    fn a_short_soak_holds_and_repeats() {
        let base = Instant::now();
        let a = soak(base, 5, 0.1, false).expect("the soak holds");
        let b = soak(base, 5, 0.1, false).expect("the soak holds");
        assert_eq!(format!("{:?}", a.counts), format!("{:?}", b.counts));
        let c = &a.counts;
        assert!(c.delivered > 0 && c.failed > 0 && c.cancelled > 0 && c.clears > 0 && c.timer_fired > 0);
    }
}
