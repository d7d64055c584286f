//! Failures proptest found in the past, as steps. They were saved as seeds
//! in `properties.proptest-regressions`, which replay only as long as the
//! generator draws the same way; since the steps are drawn by kind of
//! `cmap_core::Input` (`steps.rs`), those seeds draw other cases, so each
//! is kept here as the case its seed's comment wrote (fields added to
//! `Opts` since take their quietest values), run as both properties ran
//! it.

use cmap_core::InputKind;
use proptest::test_runner::TestCaseError;

use crate::steps::{Drawn, Step};
use crate::support::origin;
use crate::{run, same_outputs, Events, Opts};

/// The options the saved cases leave out: no limit, one connection at a
/// time, no timers, paused at first.
fn quiet() -> Opts {
    Opts {
        max_pool_size: 0,
        min_pool_size: 0,
        max_connecting: 1,
        adaptive: None,
        wait_queue_timeout_ms: None,
        max_idle_ms: None,
        maintenance_ms: None,
        lifetime: None,
        keep_ready: false,
        keep_waiting: false,
        reconnect: None,
        load_balanced: false,
        seed: 0,
        start_ready: false,
    }
}

fn input(kind: InputKind, value: i64, flags: u8) -> Step {
    Step::Input(Drawn {
        value,
        flags,
        ..Drawn::of(kind)
    })
}

fn check_out() -> Step {
    Step::Input(Drawn::check_out())
}

fn ready() -> Step {
    input(InputKind::Ready, 0, 0)
}

/// An establishment failure: 0 network, 2 other (`Drawn::fail_kind`).
fn failed(kind: i64) -> Step {
    input(InputKind::EstablishFailed, kind, 0)
}

fn cases() -> Vec<(Opts, Vec<Step>)> {
    let check_in = input(InputKind::CheckIn, 0, 0);
    vec![
        (quiet(), vec![check_out()]),
        (
            Opts {
                wait_queue_timeout_ms: Some(377),
                ..quiet()
            },
            vec![
                ready(),
                check_out(),
                Step::Advance { ms: 119 },
                Step::Jump { ms: 258 },
                check_in,
            ],
        ),
        (
            Opts {
                max_pool_size: 1,
                min_pool_size: 1,
                maintenance_ms: Some(8),
                keep_ready: true,
                reconnect: Some((6, 11, None, 1)),
                seed: 404000995280039749,
                start_ready: true,
                ..quiet()
            },
            vec![
                Step::Stale {
                    ms: 0,
                    input: Drawn::of(InputKind::Timeout),
                },
                check_out(),
                failed(2),
                check_out(),
                Step::Advance { ms: 8 },
                failed(2),
                Step::FireTimer { early: false },
                Step::Jump { ms: 1 },
                check_in,
            ],
        ),
        (
            Opts {
                max_pool_size: 3,
                max_connecting: 2,
                wait_queue_timeout_ms: Some(1),
                reconnect: Some((1, 1, None, 1)),
                ..quiet()
            },
            vec![
                ready(),
                check_out(),
                Step::Jump { ms: 1 },
                input(InputKind::Close, 0, 0),
            ],
        ),
        (
            Opts {
                keep_waiting: true,
                ..quiet()
            },
            vec![ready(), check_out(), failed(0)],
        ),
        (
            Opts {
                max_pool_size: 3,
                max_connecting: 2,
                keep_waiting: true,
                reconnect: Some((1, 1, None, 1)),
                ..quiet()
            },
            vec![
                check_out(),
                check_out(),
                check_out(),
                ready(),
                check_out(),
                check_out(),
                failed(0),
                Step::Jump { ms: 1 },
                failed(0),
            ],
        ),
        (
            quiet(),
            vec![
                ready(),
                check_out(),
                input(InputKind::Established, 0, 0),
                input(InputKind::Clear, 0, crate::steps::INTERRUPT),
                input(InputKind::Close, 0, 0),
                check_out(),
            ],
        ),
    ]
}

/// Each saved case passes both properties.
#[test]
fn saved_failures_stay_fixed() -> Result<(), TestCaseError> {
    for (opts, steps) in cases() {
        run(&opts, &steps, origin(), Events::Merged, false).map_err(TestCaseError::fail)?;
        same_outputs(&opts, &steps)?;
    }
    Ok(())
}
