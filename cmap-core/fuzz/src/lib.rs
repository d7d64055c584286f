//! The harness of the `commands` fuzz target: bytes decoded into a
//! [`Case`] of cmap-core's testing kit (`cmap_core::testing`): random pool
//! options and a random sequence of steps on virtual time, each time
//! passing or one `cmap_core::Input` whose arguments come from the books of
//! a minimal driver. The kit's [`run`] checks, after every input, the
//! core's invariants, the books against the core's counts, every action
//! against the books and that time is honoured; then the same case again
//! gives the same outputs, and its recording replays exactly.
#![forbid(unsafe_code)]

use arbitrary::Unstructured;
use cmap_core::testing::{self, Case, CaseOptions, Step};

/// The most inputs one run feeds: longer sequences find nothing shorter
/// ones do not, and slow the fuzzer down.
const MAX_STEPS: usize = 256;

/// Decodes a case: the options first, then steps until the bytes run out
/// (at most [`MAX_STEPS`]). Every byte string long enough for the options
/// is a case, and a mutation that adds bytes adds steps.
pub fn case_from_bytes(data: &[u8]) -> Option<Case> {
    let mut u = Unstructured::new(data);
    let options = options(&mut u).ok()?;
    let mut steps = Vec::new();
    while !u.is_empty() && steps.len() < MAX_STEPS {
        steps.push(step(&mut u).ok()?);
    }
    Some(Case { options, steps })
}

fn options(u: &mut Unstructured<'_>) -> arbitrary::Result<CaseOptions> {
    Ok(CaseOptions {
        max_pool_size: u.arbitrary()?,
        min_pool_size: u.arbitrary()?,
        max_connecting: u.arbitrary()?,
        wait_queue_timeout_ms: u.arbitrary()?,
        max_idle_ms: u.arbitrary()?,
        lifetime_ms: u.arbitrary()?,
        maintenance_ms: u.arbitrary()?,
        keep_ready: u.arbitrary()?,
        keep_waiting: u.arbitrary()?,
        reconnect: u.arbitrary()?,
        seed: u.arbitrary()?,
    })
}

/// The longest a step lets time pass, as the kit's own strategy
/// (`testing::strategy::step`): with a 1 ms maintenance interval, every
/// millisecond is a timer turn, and a minute in one step made one input
/// run for seconds under the fuzzer's instrumentation (a "slow unit").
const MAX_ADVANCE_MS: u16 = 2000;

fn step(u: &mut Unstructured<'_>) -> arbitrary::Result<Step> {
    Ok(if u.arbitrary::<bool>()? {
        Step::Advance(u.arbitrary::<u16>()? % MAX_ADVANCE_MS)
    } else {
        Step::Input {
            kind: u.arbitrary()?,
            pick: u.arbitrary()?,
            value: u.arbitrary()?,
            flags: u.arbitrary()?,
        }
    })
}

/// Runs a case through the kit, from one instant for both of its runs.
pub fn run(case: &Case) {
    testing::run(case, std::time::Instant::now());
}

#[cfg(test)]
mod tests {
    use super::*;
    use cmap_core::InputKind;

    // The flags of a step.
    const OWN_DEADLINE: u8 = 1;
    const DIRECT: u8 = 2;
    const ERRORED: u8 = 1;
    const DIRECT_CHECK_IN: u8 = 4;
    const INTERRUPT: u8 = 1;

    /// Every kind of input at least once, through a small pool, so that
    /// the harness itself is exercised by `cargo test` in this crate.
    #[test]
    fn a_run_through_every_step_kind_replays() {
        let input = Case {
            options: CaseOptions {
                max_pool_size: 2,
                min_pool_size: 1,
                max_connecting: 1,
                wait_queue_timeout_ms: Some(50),
                max_idle_ms: Some(500),
                lifetime_ms: Some(1000),
                maintenance_ms: Some(100),
                keep_ready: false,
                keep_waiting: true,
                reconnect: true,
                seed: 7,
            },
            steps: vec![
                Step::input(InputKind::CheckOut, 0, 0, DIRECT),
                Step::input(InputKind::Established, 0, 0, 0),
                Step::input(InputKind::CheckOut, 0, 10, OWN_DEADLINE),
                Step::input(InputKind::EstablishFailed, 0, 0, 0),
                Step::Advance(20),
                Step::input(InputKind::CheckIn, 0, 0, DIRECT_CHECK_IN),
                Step::input(InputKind::CheckOut, 0, 0, 0),
                Step::input(InputKind::Cancel, 0, 0, 0),
                Step::input(InputKind::Clear, 0, 0, INTERRUPT),
                Step::input(InputKind::Ready, 0, 0, 0),
                Step::input(InputKind::Detach, 0, 0, 0),
                Step::input(InputKind::CheckOut, 0, 0, DIRECT),
                Step::input(InputKind::Established, 0, 0, 0),
                Step::input(InputKind::CheckIn, 0, 0, ERRORED),
                Step::input(InputKind::EventsApart, 0, 0, 1),
                Step::input(InputKind::EventsEnabled, 0, 0, 1),
                Step::input(InputKind::Timeout, 0, 0, 0),
                Step::input(InputKind::EventsEnabled, 0, 0, 0),
                Step::input(InputKind::Resize, 0, 0x0301, 0),
                Step::input(InputKind::ResetAfterFork, 0, 0, 0),
                Step::Advance(2000),
                Step::input(InputKind::CheckOut, 0, 0, DIRECT),
                Step::input(InputKind::Close, 0, 0, 0),
                Step::input(InputKind::ForceClose, 0, 0, 0),
            ],
        };
        for kind in InputKind::ALL {
            let drawn = input
                .steps
                .iter()
                .any(|s| matches!(s, Step::Input { kind: k, .. } if InputKind::ALL[usize::from(*k)] == kind));
            assert!(drawn, "the scripted run draws {kind:?}");
        }
        run(&input);
    }

    /// Random byte strings through the harness, as the fuzzer would feed
    /// it but without coverage guidance: a smoke test that runs anywhere.
    #[test]
    fn random_cases_replay() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut steps = 0;
        for _ in 0..3000 {
            let len = (next() % 2048) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if let Some(input) = case_from_bytes(&bytes) {
                steps += input.steps.len().min(MAX_STEPS);
                run(&input);
            }
        }
        assert!(
            steps > 30_000,
            "the cases are long enough to matter: {steps} steps"
        );
    }
}
