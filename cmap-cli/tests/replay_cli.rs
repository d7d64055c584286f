//! `cmap replay` and `cmap timeline`: a recording of the core replays and prints its
//! timeline, the state at an instant, or a divergence with a failure exit.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use cmap_core::{Action, Output, Pool, PoolOptions};

/// A short recorded run: two checkouts, a connection established for
/// them, one checked in, a timeout.
#[allow(clippy::disallowed_methods)]
fn recording_file(name: &str) -> PathBuf {
    let t0 = Instant::now();
    let options = PoolOptions::builder()
        .max_pool_size(1)
        .wait_queue_timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let mut pool: Pool<()> = Pool::new(t0, "db:27017".parse().unwrap(), options);
    pool.handle_ready(t0).unwrap();
    while pool.poll_output().is_some() {}
    pool.start_recording(t0, 1000);
    let first = pool.handle_check_out(t0);
    let _second = pool.handle_check_out(t0);
    let mut id = None;
    let mut conn = None;
    let t1 = t0 + Duration::from_millis(5);
    while let Some(out) = pool.poll_output() {
        if let Output::Action(Action::Establish { id: i }) = out {
            id = Some(i);
        }
    }
    pool.handle_established(t1, id.unwrap(), (), None).unwrap();
    while let Some(out) = pool.poll_output() {
        if let Output::Action(Action::Deliver { waiter, connection }) = out {
            assert_eq!(waiter, first);
            conn = Some(connection);
        }
    }
    pool.handle_timeout(t0 + Duration::from_millis(60));
    pool.handle_check_in(t0 + Duration::from_millis(70), conn.unwrap())
        .unwrap();
    while pool.poll_output().is_some() {}
    let path = std::env::temp_dir().join(format!("cmap-replay-{}-{name}.jsonl", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    pool.recording().unwrap().write_to(file).unwrap();
    path
}

fn replay(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cmap"))
        .arg("replay")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_recording_replays_with_its_timeline() {
    let path = recording_file("timeline");
    let (ok, out, err) = replay(&[path.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("WaitQueueTimeout"), "{out}");
    assert!(out.contains("5 inputs replayed"), "{out}");
    let (ok, out, _) = replay(&["--at", "0.001", path.to_str().unwrap()]);
    assert!(ok);
    assert!(out.contains("2 waiting"), "the state at 1 ms: {out}");
    assert!(out.contains("pending   #1"), "{out}");
    std::fs::remove_file(path).unwrap();
}

#[test]
fn a_recording_that_does_not_replay_fails_the_command() {
    let path = recording_file("altered");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("ConnectionId(1)", "ConnectionId(4)")).unwrap();
    let (ok, _, err) = replay(&["--quiet", path.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("diverged"), "{err}");
    std::fs::remove_file(path).unwrap();
}

/// `cmap timeline FILE`: the picture beside the recording by default; a
/// recording that does not replay draws nothing and fails the command.
#[test]
fn a_recording_draws_its_timeline_beside_it() {
    let path = recording_file("picture");
    let cmap = |path: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_cmap"))
            .arg("timeline")
            .arg(path)
            .output()
            .unwrap()
    };
    let out = cmap(&path);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let svg_path = path.with_extension("svg");
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
    assert!(
        svg.contains("checkout failed: WaitQueueTimeout"),
        "the timeout's mark"
    );
    std::fs::remove_file(&svg_path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("ConnectionId(1)", "ConnectionId(4)")).unwrap();
    let out = cmap(&path);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("diverged"));
    assert!(!svg_path.exists());
    std::fs::remove_file(path).unwrap();
}
