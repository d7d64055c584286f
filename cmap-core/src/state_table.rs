//! The pool's states × inputs table (spec: "Connection Pool Behaviors"),
//! as data: [`TABLE`] is the table at the top of `pool.rs`, and the tests
//! below check every cell against what the code does, and that `pool.rs`
//! shows this very table. Built for tests only.

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
        input: "clear",
        cells: [
            cell(Paused, "", "stays paused, generation + 1, no event"),
            cell(Paused, "ConnectionPoolCleared, ConnectionCheckOutFailed, ConnectionCheckOutFailed", "paused, generation + 1, every waiter fails (retryable)"),
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
        input: "resize",
        cells: [
            cell(Paused, "ConnectionPoolResized", "new sizes; idle above the maximum closed"),
            cell(Ready, "ConnectionPoolResized, ConnectionCreated", "new sizes; waiters served, idle above the maximum closed"),
            cell(Closed, "Err(ResizeClosed)", "`Err(ResizeClosed)`"),
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
    use crate::output::{Action, Output};
    use crate::pool::{Clear, Pool, PoolState};
    use crate::{Address, ConnectionId, PoolOptions, Pooled};

    /// A pool in `state` with a connection in use (`held`) and one being
    /// established (`pending`) for a checkout that waits (maxPoolSize 2).
    struct Setup {
        pool: Pool<u64>,
        held: Option<Pooled<u64>>,
        pending: ConnectionId,
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
        pool.handle_check_out(now);
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
        Setup { pool, held, pending }
    }

    fn apply(input: &str, s: &mut Setup) -> String {
        let now = s.pool.now() + Duration::from_millis(1);
        let result: Result<(), String> = match input {
            "check out" => {
                s.pool.handle_check_out(now);
                Ok(())
            }
            "check in" => {
                let held = s.held.take().expect("held");
                s.pool.handle_check_in(now, held).map_err(|e| e.to_string())
            }
            "established" => s
                .pool
                .handle_established(now, s.pending, 2, None)
                .map_err(|e| e.to_string()),
            "establish failed (unlabelled)" => {
                let error =
                    EstablishError::new(EstablishErrorKind::Authentication, std::io::Error::other("no"));
                s.pool
                    .handle_establish_failed(now, s.pending, error)
                    .map_err(|e| e.to_string())
            }
            "clear" => s
                .pool
                .handle_clear(now, Clear::default())
                .map_err(|e| format!("{e:?}")),
            "ready" => s.pool.handle_ready(now).map_err(|e| format!("{e:?}")),
            "close" => {
                s.pool.handle_close(now);
                Ok(())
            }
            "resize" => s.pool.handle_resize(now, 0, 5).map_err(|e| format!("{e:?}")),
            "force close" => s
                .pool
                .handle_force_close(now)
                .map(drop)
                .map_err(|e| format!("{e:?}")),
            other => panic!("no input {other}"),
        };
        let (events, _) = drain(&mut s.pool);
        let said = match result {
            Ok(()) => events.join(", "),
            Err(e) => format!("Err({e})"),
        };
        format!("{:?}: {said}", s.pool.state())
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
