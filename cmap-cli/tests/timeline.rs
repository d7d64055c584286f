//! `cmap timeline`: the picture of a recording made through the fault
//! proxy (a server restart under load) shows the clear, the failures and
//! the refill at the recorded instants.

// The tokio examples' manager: TCP connections to an address (here, the
// proxy's).
#[path = "../../cmap-tokio/examples/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cmap_testkit::echo::echo_server;
use cmap_testkit::proxy::{Mode, Proxy};
use cmap_tokio::{AdaptiveConnecting, Pool, Recording};
use common::Echo;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Eight tasks echo through the pool; at 300 ms the server goes away (its
/// connections cut, new ones refused) and the pool is cleared, as a
/// driver's monitor would; at 350 ms the pool is readied while the server
/// still refuses; at 600 ms it is back.
fn restart_under_load() -> Recording {
    let upstream = echo_server().unwrap();
    let proxy = Proxy::start(upstream).unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], proxy.port()).into();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let pool = Pool::builder()
            .address(addr.to_string())
            .max_pool_size(4)
            .min_pool_size(2)
            .wait_queue_timeout(Duration::from_millis(100))
            .adaptive_connecting(AdaptiveConnecting { min: 2, max: 4 })
            .flight_recorder(100_000)
            .build(Echo { addr })
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (pool, stop) = (pool.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    match pool.get().await {
                        Ok(mut conn) => {
                            let echoed = async {
                                conn.write_all(b"ping\n").await?;
                                conn.read_exact(&mut [0; 5]).await
                            };
                            let _ = tokio::time::timeout(Duration::from_millis(50), echoed).await;
                            tokio::time::sleep(Duration::from_millis(2)).await;
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                    }
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        pool.clear(false).unwrap();
        proxy.set(Mode::Refuse);
        proxy.cut();
        tokio::time::sleep(Duration::from_millis(50)).await;
        pool.ready().unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
        proxy.set(Mode::Pass);
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.store(true, Ordering::SeqCst);
        for task in tasks {
            task.await.unwrap();
        }
        pool.recording().expect("the recorder runs")
    })
}

/// The recording's own lines after the snapshot: `(at, input)` per input
/// with the outputs it caused.
fn recorded(file: &std::path::Path) -> Vec<(i64, Value, Vec<String>)> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut inputs: Vec<(i64, Value, Vec<String>)> = Vec::new();
    for line in text.lines().skip(2) {
        let line: Value = serde_json::from_str(line).unwrap();
        match line.get("output") {
            Some(output) => inputs
                .last_mut()
                .unwrap()
                .2
                .push(output.as_str().unwrap().to_owned()),
            None => inputs.push((line["at"].as_i64().unwrap(), line["input"].clone(), Vec::new())),
        }
    }
    inputs
}

/// The data in the picture's `<metadata>`.
fn picture_data(svg: &str) -> Value {
    let start = svg.find("<metadata id=\"cmap-timeline\"><![CDATA[").unwrap();
    let body = &svg[start..];
    let body = &body[body.find("[CDATA[").unwrap() + 7..body.find("]]></metadata>").unwrap()];
    serde_json::from_str(&body.replace("]]]]><![CDATA[>", "]]>")).unwrap()
}

#[test]
fn a_restart_under_load_shows_the_clear_the_failures_and_the_refill() {
    let recording = restart_under_load();
    let dir = std::env::temp_dir();
    let file = dir.join(format!("cmap-timeline-{}.jsonl", std::process::id()));
    let svg_file = dir.join(format!("cmap-timeline-{}.svg", std::process::id()));
    recording.write_to(std::fs::File::create(&file).unwrap()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cmap"))
        .args([
            "timeline".as_ref(),
            file.as_os_str(),
            "-o".as_ref(),
            svg_file.as_os_str(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let svg = std::fs::read_to_string(&svg_file).unwrap();
    let data = picture_data(&svg);
    let inputs = recorded(&file);
    let marks = data["marks"].as_array().unwrap();
    let marks_of = |kind: &'static str| marks.iter().filter(move |m| m["kind"] == kind);

    // The clear, at the instant the Clear input was recorded.
    let clear_at = inputs
        .iter()
        .find(|(_, input, _)| input.get("Clear").is_some())
        .unwrap()
        .0;
    let clears: Vec<&Value> = marks_of("clear").collect();
    assert_eq!(clears.len(), 1, "{clears:?}");
    assert_eq!(
        (clears[0]["at"].as_i64(), clears[0]["generation"].as_u64()),
        (Some(clear_at), Some(1))
    );
    assert!(clears[0]["input"].as_str().unwrap().contains("Clear"));
    assert!(
        svg.contains("cleared, generation 1\ninput: {&quot;Clear&quot;"),
        "the clear's hover names its input"
    );

    // Every establishment refused, at its instant, labelled overloaded.
    let refused: Vec<i64> = inputs
        .iter()
        .filter(|(_, input, _)| input.get("EstablishFailed").is_some())
        .map(|(at, _, _)| *at)
        .collect();
    assert!(refused.len() >= 3, "{} establishments failed", refused.len());
    let drawn: Vec<i64> = marks_of("establish_failed")
        .map(|m| m["at"].as_i64().unwrap())
        .collect();
    assert_eq!(drawn, refused);
    assert!(marks_of("establish_failed").all(|m| m["labels"]
        .as_array()
        .unwrap()
        .contains(&"SystemOverloadedError".into())));
    assert!(
        svg.contains("SystemOverloadedError, RetryableError"),
        "the lane's row names the labels"
    );

    // Every failed checkout, with its reason; those the clear failed come at it.
    let failed: Vec<(i64, String)> = inputs
        .iter()
        .flat_map(|(at, _, outputs)| {
            outputs
                .iter()
                .filter(|o| o.starts_with("Fail {"))
                .map(|o| (*at, o.clone()))
        })
        .map(|(at, o)| {
            (
                at,
                o.split("error: ")
                    .nth(1)
                    .unwrap()
                    .split([' ', '{'])
                    .next()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect();
    let drawn: Vec<(i64, String)> = marks_of("checkout_failed")
        .map(|m| {
            (
                m["at"].as_i64().unwrap(),
                m["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(drawn, failed);
    assert!(
        drawn
            .iter()
            .any(|(at, reason)| *at == clear_at && reason == "PoolCleared"),
        "{drawn:?}"
    );

    // The refill: after the last refusal, the first connection established
    // is drawn at its instant, and the pool ends with connections again.
    let last_refused = *refused.last().unwrap();
    let established = inputs
        .iter()
        .find(|(at, input, _)| *at > last_refused && input.get("Established").is_some())
        .unwrap()
        .0;
    let samples = data["samples"].as_array().unwrap();
    let connected = |s: &Value| s[2].as_u64().unwrap() + s[3].as_u64().unwrap();
    let back = samples
        .iter()
        .find(|s| s[0].as_i64().unwrap() > last_refused && connected(s) > 0)
        .unwrap();
    assert_eq!(back[0].as_i64(), Some(established));
    assert!(samples.iter().any(|s| s[0].as_i64().unwrap() > clear_at
        && s[0].as_i64().unwrap() < last_refused
        && connected(s) == 0));
    assert!(connected(samples.last().unwrap()) >= 2, "{:?}", samples.last());

    // The adaptive pace: a single probe while the server refuses.
    assert_eq!(data["adaptive_pace"], true);
    assert!(svg.contains(">establishment pace<"));
    assert!(samples
        .iter()
        .any(|s| s[0].as_i64().unwrap() > clear_at && s[0].as_i64().unwrap() <= last_refused && s[6] == 1));
    // The picture of docs/flight-recorder.md is this one:
    // `CMAP_TIMELINE_SVG=docs/img/timeline-restart.svg cargo test -p cmap-cli --test timeline`.
    if let Some(keep) = std::env::var_os("CMAP_TIMELINE_SVG") {
        let keep = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(keep);
        std::fs::write(
            keep,
            svg.replace(
                &*file.file_name().unwrap().to_string_lossy(),
                "restart-under-load.jsonl",
            ),
        )
        .unwrap();
    }
    std::fs::remove_file(&file).unwrap();
    std::fs::remove_file(&svg_file).unwrap();
}
