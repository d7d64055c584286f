//! A small HTTP service on cmap-tokio and cmap-postgres, as a production
//! service would use the pool (docs/guide.md):
//!
//! - `POST /notes` (the body is the note) and `GET /notes/{id}`: one
//!   handler per query, each a checkout bounded by the pool's wait;
//! - `GET /metrics`: the pool's metrics in Prometheus' text format;
//! - `GET /health`: the pool's status, 200 while it is ready, 503 when it
//!   is paused (a server that went away) or closed;
//! - SIGTERM or Ctrl-C: the server stops taking requests, lets those in
//!   flight finish, then `close_gracefully` waits for the connections in
//!   use before closing the rest.
//!
//! ```text
//! cargo run -p cmap-example-axum -- 127.0.0.1:3000 "host=127.0.0.1 user=postgres dbname=test"
//! ```
//!
//! `.ci/example-service.sh` starts it, sends it requests and stops it.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use cmap_postgres::{NoTls, PgManager};
use cmap_tokio::{GetError, Pool, PoolState};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// What every handler shares: cheap to clone (the pool is a handle).
#[derive(Clone)]
struct App {
    pool: Pool<PgManager>,
    metrics: PrometheusHandle,
}

/// A handler's failure, as an HTTP answer: a pool that could not serve
/// in time is 503 (retry later), a query that failed 500.
enum Failure {
    Pool(GetError),
    Query(cmap_postgres::tokio_postgres::Error),
    NotFound,
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        match self {
            Failure::Pool(error) => (StatusCode::SERVICE_UNAVAILABLE, error.to_string()).into_response(),
            Failure::Query(error) => (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response(),
            Failure::NotFound => StatusCode::NOT_FOUND.into_response(),
        }
    }
}

impl From<GetError> for Failure {
    fn from(error: GetError) -> Self {
        Failure::Pool(error)
    }
}

impl From<cmap_postgres::tokio_postgres::Error> for Failure {
    fn from(error: cmap_postgres::tokio_postgres::Error) -> Self {
        Failure::Query(error)
    }
}

async fn add_note(
    State(app): State<App>,
    body: String,
) -> Result<(StatusCode, Json<serde_json::Value>), Failure> {
    let conn = app.pool.get().await?;
    let row = conn
        .query_one(
            "INSERT INTO cmap_example_notes (body) VALUES ($1) RETURNING id",
            &[&body],
        )
        .await?;
    let id: i32 = row.get(0);
    Ok((StatusCode::CREATED, Json(serde_json::json!({ "id": id }))))
}

async fn note(State(app): State<App>, Path(id): Path<i32>) -> Result<Json<serde_json::Value>, Failure> {
    let conn = app.pool.get().await?;
    let row = conn
        .query_opt("SELECT body FROM cmap_example_notes WHERE id = $1", &[&id])
        .await?
        .ok_or(Failure::NotFound)?;
    let body: String = row.get(0);
    Ok(Json(serde_json::json!({ "id": id, "body": body })))
}

async fn render_metrics(State(app): State<App>) -> String {
    app.metrics.render()
}

async fn health(State(app): State<App>) -> (StatusCode, Json<serde_json::Value>) {
    let status = app.pool.status();
    let code = match status.state {
        PoolState::Ready => StatusCode::OK,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    let body = serde_json::json!({
        "state": format!("{:?}", status.state),
        "available": status.available,
        "in_use": status.in_use,
        "pending": status.pending,
        "waiting": status.waiting,
    });
    (code, Json(body))
}

/// Resolves on SIGTERM (what a process manager sends) or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:3000".into());
    let config = args
        .next()
        .unwrap_or_else(|| "host=127.0.0.1 user=postgres dbname=test".into());

    // The recorder first: a pool takes its metric handles when built.
    let metrics = PrometheusBuilder::new().install_recorder()?;
    let manager = PgManager::new(config.parse()?, NoTls);
    let pool = Pool::builder()
        .address(manager.address())
        .max_pool_size(10)
        .min_pool_size(2)
        .wait_queue_timeout(Duration::from_secs(2))
        .leak_detection_threshold(Duration::from_secs(30))
        .metrics(true)
        .build(manager)?;
    // Fail at start, with the cause, if the database does not answer.
    pool.wait_ready(Duration::from_secs(10)).await?;
    pool.get()
        .await?
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS cmap_example_notes (id serial PRIMARY KEY, body text NOT NULL)",
        )
        .await?;

    let app = App {
        pool: pool.clone(),
        metrics,
    };
    let router = Router::new()
        .route("/notes", post(add_note))
        .route("/notes/{id}", get(note))
        .route("/metrics", get(render_metrics))
        .route("/health", get(health))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown_signal())
        .await?;

    // The server has stopped and its requests are done: the pool lets the
    // connections still in use come back, at most 10 s, then closes.
    let forced = pool.close_gracefully(Duration::from_secs(10)).await;
    println!("stopped; {forced} connections forced closed");
    Ok(())
}
