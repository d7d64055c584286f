//! The pool's states × inputs table (spec: "Connection Pool Behaviors"),
//! as data: [`TABLE`] is the table at the top of `pool.rs`, one row per
//! kind of [`Input`](crate::Input), and the tests below apply each row's
//! input through `Pool::handle` and check every cell against what the code
//! does, that every kind of input has its row (a new variant fails to
//! compile in `row_of`), and that `pool.rs` shows this very table. Built
//! for tests only.

use crate::pool::PoolState;
use PoolState::{Closed, Paused, Ready};

/// One cell: the state after the input, what it says (its events in
/// order, or its error), and the words `pool.rs` shows.
pub(crate) struct Cell {
    pub(crate) after: PoolState,
    pub(crate) says: &'static str,
    pub(crate) text: &'static str,
}

/// One input, in the paused, ready and closed states. The test's pool
/// holds one connection in use and one being established for the first
/// of two queued checkouts (maxPoolSize 2).
pub(crate) struct Row {
    pub(crate) input: &'static str,
    pub(crate) cells: [Cell; 3],
}

const fn cell(after: PoolState, says: &'static str, text: &'static str) -> Cell {
    Cell { after, says, text }
}

/// The table; `pool.rs` shows it as Markdown.
pub(crate) const TABLE: &[Row] = &[
    Row {
        input: "check out",
        cells: [
            cell(Paused, "ConnectionCheckOutStarted, ConnectionCheckOutFailed", "fails: `PoolClearedError` (retryable)"),
            cell(Ready, "ConnectionCheckOutStarted", "served by an available connection, or queued (and a connection started for it within the limits)"),
            cell(Closed, "ConnectionCheckOutStarted, ConnectionCheckOutFailed", "fails: `PoolClosedError`"),
        ],
    },
    Row {
        input: "check in",
        cells: [
            cell(Paused, "ConnectionCheckedIn, ConnectionClosed", "pooled, or closed if perished (stale after the clear)"),
            cell(Ready, "ConnectionCheckedIn, ConnectionCheckedOut", "handed to the oldest waiter, or pooled; closed if perished"),
            cell(Closed, "ConnectionCheckedIn, ConnectionClosed", "closed (`poolClosed`)"),
        ],
    },
    Row {
        input: "detach",
        cells: [
            cell(Paused, "ConnectionClosed", "closed (`detached`), out of the pool's count"),
            cell(Ready, "ConnectionClosed, ConnectionCreated", "closed (`detached`); its room starts a connection for a waiter"),
            cell(Closed, "ConnectionClosed", "closed (`detached`)"),
        ],
    },
    Row {
        input: "established",
        cells: [
            cell(Paused, "ConnectionReady", "available (not handed out while paused)"),
            cell(Ready, "ConnectionReady, ConnectionCheckedOut", "available, then the oldest waiter gets it"),
            cell(Closed, "", "disposed of (abandoned at close: its event is out)"),
        ],
    },
    Row {
        input: "establish failed (unlabelled)",
        cells: [
            cell(Paused, "ConnectionClosed", "closed (`error`); a stale failure does not clear again"),
            cell(Paused, "ConnectionPoolCleared, ConnectionCheckOutFailed, ConnectionClosed, ConnectionCheckOutFailed", "clears (pauses; waiters fail), closed (`error`), its requester fails with the error; a labelled failure leaves the pool ready"),
            cell(Closed, "", "ignored (abandoned at close)"),
        ],
    },
    Row {
        input: "cancel",
        cells: [
            cell(Paused, "Err(UnknownWaiter(WaiterId(3)))", "`Err(UnknownWaiter)`: the clear failed every waiter"),
            cell(Ready, "", "leaves the queue, no event"),
            cell(Closed, "Err(UnknownWaiter(WaiterId(3)))", "`Err(UnknownWaiter)`: the close failed every waiter"),
        ],
    },
    Row {
        input: "clear",
        cells: [
            cell(Paused, "", "stays paused, generation + 1, no event"),
            cell(Paused, "ConnectionPoolCleared, ConnectionCheckOutFailed, ConnectionCheckOutFailed", "paused, generation + 1, every waiter fails (retryable)"),
            cell(Closed, "", "nothing"),
        ],
    },
    Row {
        input: "reset after fork",
        cells: [
            cell(Paused, "ConnectionClosed, ConnectionClosed", "stays paused, generation + 1, no cleared event; in use and pending connections closed"),
            cell(Paused, "ConnectionPoolCleared, ConnectionClosed, ConnectionClosed, ConnectionCheckOutFailed, ConnectionCheckOutFailed", "clears, interrupting what is in use and closing what is pending; waiters fail"),
            cell(Closed, "", "nothing"),
        ],
    },
    Row {
        input: "ready",
        cells: [
            cell(Ready, "ConnectionPoolReady", "ready; a background run populates"),
            cell(Ready, "", "nothing"),
            cell(Closed, "Err(PoolClosed)", "`Err(PoolClosed)`"),
        ],
    },
    Row {
        input: "close",
        cells: [
            cell(Closed, "ConnectionClosed, ConnectionPoolClosed", "closed: idle closed, pending abandoned"),
            cell(Closed, "ConnectionClosed, ConnectionCheckOutFailed, ConnectionCheckOutFailed, ConnectionPoolClosed", "closed: idle closed, pending abandoned, waiters fail"),
            cell(Closed, "", "nothing"),
        ],
    },
    Row {
        input: "force close",
        cells: [
            cell(Paused, "Err(NotClosed)", "`Err(NotClosed)`"),
            cell(Ready, "Err(NotClosed)", "`Err(NotClosed)`"),
            cell(Closed, "ConnectionClosed", "connections in use interrupted (`poolClosed`)"),
        ],
    },
    Row {
        input: "resize",
        cells: [
            cell(Paused, "ConnectionPoolResized", "new sizes; idle above the maximum closed"),
            cell(Ready, "ConnectionPoolResized, ConnectionCreated", "new sizes; waiters served, idle above the maximum closed"),
            cell(Closed, "Err(ResizeClosed)", "`Err(ResizeClosed)`"),
        ],
    },
    Row {
        input: "timeout",
        cells: [
            cell(Paused, "", "nothing due (no waiter, no background run while paused)"),
            cell(Ready, "ConnectionCheckOutFailed, ConnectionCheckOutFailed", "checkouts past their deadline fail (timeout); background work that is due runs"),
            cell(Closed, "", "nothing"),
        ],
    },
    Row {
        input: "events off",
        cells: [
            cell(Paused, "", "no event built from here on"),
            cell(Ready, "", "no event built from here on"),
            cell(Closed, "", "no event built from here on"),
        ],
    },
    Row {
        input: "events apart",
        cells: [
            cell(Paused, "", "events kept for `take_events` from here on"),
            cell(Ready, "", "events kept for `take_events` from here on"),
            cell(Closed, "", "events kept for `take_events` from here on"),
        ],
    },
];

/// The table as the Markdown `pool.rs` shows, one line per row.
fn markdown() -> Vec<String> {
    let mut lines = vec![
        "| input | paused | ready | closed |".to_owned(),
        "| --- | --- | --- | --- |".to_owned(),
    ];
    for row in TABLE {
        let [p, r, c] = &row.cells;
        lines.push(format!(
            "| {} | {} | {} | {} |",
            row.input, p.text, r.text, c.text
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{markdown, TABLE};
    use crate::error::{EstablishError, EstablishErrorKind};
    use crate::input::{HandleError, Input, InputKind};
    use crate::output::{Action, Output};
    use crate::pool::{Clear, Pool, PoolState};
    use crate::{Address, ConnectionId, PoolOptions, Pooled, WaiterId};

    /// A pool in `state` with a connection in use (`held`) and one being
    /// established (`pending`) for a checkout that waits (maxPoolSize 2).
    struct Setup {
        pool: Pool<u64>,
        held: Option<Pooled<u64>>,
        pending: ConnectionId,
        /// The second checkout queued, for which no connection is made.
        last_waiter: WaiterId,
    }

    fn drain(pool: &mut Pool<u64>) -> (Vec<&'static str>, Vec<Action<u64>>) {
        let (mut events, mut actions) = (Vec::new(), Vec::new());
        while let Some(out) = pool.poll_output() {
            match out {
                Output::Event(e) => events.push(e.name()),
                Output::Action(a) => actions.push(a),
            }
        }
        (events, actions)
    }

    fn setup(state: PoolState) -> Setup {
        let now = crate::test_clock::origin();
        let options = PoolOptions::builder()
            .max_pool_size(2)
            .wait_queue_timeout(Duration::from_secs(1))
            .maintenance_interval(None)
            .build()
            .unwrap();
        let mut pool = Pool::new(now, Address::new("h", 1), options);
        pool.handle_ready(now).unwrap();
        pool.handle_check_out(now);
        let (_, actions) = drain(&mut pool);
        let Some(Action::Establish { id }) = actions.into_iter().next() else {
            panic!("the first checkout starts a connection")
        };
        pool.handle_established(now, id, 1, None).unwrap();
        let held = drain(&mut pool).1.into_iter().find_map(|a| match a {
            Action::Deliver { connection, .. } => Some(connection),
            _ => None,
        });
        pool.handle_check_out(now);
        let last_waiter = pool.handle_check_out(now);
        let pending = drain(&mut pool)
            .1
            .into_iter()
            .find_map(|a| match a {
                Action::Establish { id } => Some(id),
                _ => None,
            })
            .expect("the second checkout starts the second connection");
        match state {
            PoolState::Ready => {}
            PoolState::Paused => pool.handle_clear(now, Clear::default()).unwrap(),
            PoolState::Closed => pool.handle_close(now),
        }
        drain(&mut pool);
        Setup {
            pool,
            held,
            pending,
            last_waiter,
        }
    }

    /// The input of a row, in the setup `s`, at `now`.
    fn input_of(row: &str, s: &mut Setup) -> Input<u64> {
        match row {
            "check out" => Input::CheckOut {
                deadline: None,
                direct: false,
            },
            "check in" => Input::CheckIn(s.held.take().expect("held")),
            "detach" => Input::Detach(s.held.take().expect("held")),
            "established" => Input::Established {
                id: s.pending,
                connection: 2,
                service_id: None,
            },
            "establish failed (unlabelled)" => Input::EstablishFailed {
                id: s.pending,
                error: EstablishError::new(EstablishErrorKind::Authentication, std::io::Error::other("no")),
            },
            "cancel" => Input::Cancel(s.last_waiter),
            "clear" => Input::Clear(Clear::default()),
            "reset after fork" => Input::ResetAfterFork,
            "ready" => Input::Ready,
            "close" => Input::Close,
            "force close" => Input::ForceClose,
            "resize" => Input::Resize { min: 0, max: 5 },
            "timeout" => Input::Timeout,
            "events off" => Input::EventsEnabled(false),
            "events apart" => Input::EventsApart(true),
            other => panic!("no input {other}"),
        }
    }

    /// The row of a kind of input: a new kind fails to compile here until
    /// the table has a row for it.
    fn row_of(kind: InputKind) -> &'static str {
        match kind {
            InputKind::CheckOut => "check out",
            InputKind::CheckIn => "check in",
            InputKind::Detach => "detach",
            InputKind::Established => "established",
            InputKind::EstablishFailed => "establish failed (unlabelled)",
            InputKind::Cancel => "cancel",
            InputKind::Clear => "clear",
            InputKind::ResetAfterFork => "reset after fork",
            InputKind::Ready => "ready",
            InputKind::Close => "close",
            InputKind::ForceClose => "force close",
            InputKind::Resize => "resize",
            InputKind::Timeout => "timeout",
            InputKind::EventsEnabled => "events off",
            InputKind::EventsApart => "events apart",
        }
    }

    fn apply(row: &str, s: &mut Setup) -> String {
        // Past the wait queue's timeout for the timer, just after the
        // setup for the rest.
        let step = if row == "timeout" {
            Duration::from_secs(2)
        } else {
            Duration::from_millis(1)
        };
        let now = s.pool.now() + step;
        let input = input_of(row, s);
        assert_eq!(row_of(input.kind()), row, "the row's input is its own");
        let result = s.pool.handle(now, input).map(drop).map_err(|e| match e {
            HandleError::Usage(e) => format!("{e:?}"),
            HandleError::CheckIn(e) => format!("{e:?}"),
        });
        let (events, _) = drain(&mut s.pool);
        let said = match result {
            Ok(()) => events.join(", "),
            Err(e) => format!("Err({e})"),
        };
        format!("{:?}: {said}", s.pool.state())
    }

    #[test]
    fn every_kind_of_input_has_one_row() {
        let mut rows: Vec<&str> = TABLE.iter().map(|row| row.input).collect();
        let kinds: Vec<&str> = InputKind::ALL.into_iter().map(row_of).collect();
        assert_eq!(rows, kinds, "a row per kind of input, in its order");
        rows.dedup();
        assert_eq!(rows.len(), TABLE.len(), "a row per kind, once");
    }

    #[test]
    fn every_cell_is_what_the_code_does() {
        for row in TABLE {
            for (state, cell) in [PoolState::Paused, PoolState::Ready, PoolState::Closed]
                .into_iter()
                .zip(&row.cells)
            {
                let mut s = setup(state);
                let expected = format!("{:?}: {}", cell.after, cell.says);
                assert_eq!(
                    apply(row.input, &mut s),
                    expected,
                    "{} in a {state:?} pool",
                    row.input
                );
            }
        }
    }

    #[test]
    fn pool_rs_shows_this_table() {
        let source = include_str!("pool.rs");
        for line in markdown() {
            assert!(
                source.contains(&format!("//! {line}\n")),
                "pool.rs does not show this row of state_table.rs:\n{line}"
            );
        }
    }
}
