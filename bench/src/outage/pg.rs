//! The four pools of `bench outage`, each with a small PostgreSQL manager
//! written here (the same behaviour for all of them): connect with
//! `tokio-postgres` (the synchronous `postgres` crate for cmap-blocking),
//! refuse a closed session before handing it out, and, for the blackhole
//! scenario, check every connection with a round trip (`select 1`).

use std::future::Future;
use std::ops::DerefMut;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cmap_tokio::{EstablishErrorKind, Event};
use tokio_postgres::{Client, NoTls};

/// What a pool is built with.
#[derive(Clone)]
pub struct PgSetup {
    /// The proxy's port.
    pub port: u16,
    pub max: u32,
    pub min: u32,
    /// The wait timeout; `None`: the pool's default.
    pub wait: Option<Duration>,
    /// Check with a round trip (`select 1`) instead of the socket's state.
    pub round_trip_check: bool,
    pub counters: Arc<Counters>,
    /// The sessions' PostgreSQL `application_name`: what the server's own
    /// count of a pool's sessions (`pg_stat_activity`) is read by.
    pub application_name: String,
    /// Where to connect when it changes while the pool runs (`bench
    /// outage --chaos` and `--soak` renew their fault proxy, which lives
    /// 300 s at most); `None`: `port`.
    pub live_port: Option<Arc<AtomicU16>>,
}

impl PgSetup {
    /// The port a connect goes to now.
    pub fn port(&self) -> u16 {
        self.live_port
            .as_ref()
            .map_or(self.port, |p| p.load(Ordering::Relaxed))
    }
}

/// What the managers and event callbacks count.
#[derive(Default)]
pub struct Counters {
    /// Connects started.
    pub started: AtomicU64,
    /// When each successful connect finished.
    pub finished: Mutex<Vec<Instant>>,
    /// `ConnectionPoolCleared` events (cmap pools).
    pub cleared: AtomicU64,
    /// Every connect attempt that ran to its end: (start, end, success).
    pub attempts: Mutex<Vec<(Instant, Instant, bool)>>,
}

impl Counters {
    fn finished_now(&self) {
        self.finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Instant::now());
    }

    fn attempt(&self, start: Instant, ok: bool) {
        let end = Instant::now();
        self.attempts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((start, end, ok));
    }
}

fn config(port: u16, application_name: &str) -> tokio_postgres::Config {
    let mut c = tokio_postgres::Config::new();
    c.host("127.0.0.1")
        .port(port)
        .user("postgres")
        .dbname("test")
        .application_name(application_name);
    c
}

/// A connect with `tokio-postgres`, its socket driven by a spawned task.
pub(super) async fn connect(setup: PgSetup) -> Result<Client, PgError> {
    let counters = setup.counters.clone();
    counters.started.fetch_add(1, Ordering::Relaxed);
    let start = Instant::now();
    let connected = config(setup.port(), &setup.application_name).connect(NoTls).await;
    counters.attempt(start, connected.is_ok());
    let (client, connection) = connected?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    counters.finished_now();
    Ok(client)
}

/// The check before a connection is handed out.
pub(super) async fn check(client: &Client, round_trip: bool) -> Result<(), PgError> {
    if client.is_closed() {
        return Err(PgError::Closed);
    }
    if round_trip {
        client.simple_query("select 1").await?;
    }
    Ok(())
}

/// Why a PostgreSQL connection could not be made or used.
#[derive(Debug)]
pub enum PgError {
    /// The driver's error (`postgres::Error` is the same type).
    Postgres(tokio_postgres::Error),
    Closed,
}

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PgError::Postgres(e) => write!(f, "postgres: {e}"),
            PgError::Closed => f.write_str("the PostgreSQL session is closed"),
        }
    }
}

impl std::error::Error for PgError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PgError::Postgres(e) => Some(e),
            PgError::Closed => None,
        }
    }
}

impl From<tokio_postgres::Error> for PgError {
    fn from(e: tokio_postgres::Error) -> PgError {
        PgError::Postgres(e)
    }
}

/// As `cmap-tokio/examples/support/pg_manager.rs` sorts them: the
/// server's answers by SQLSTATE, otherwise the socket's error.
pub(super) fn classify(error: &PgError) -> EstablishErrorKind {
    let db = match error {
        PgError::Postgres(e) => e.as_db_error(),
        PgError::Closed => return EstablishErrorKind::Network,
    };
    match db.map(|db| db.code().code()) {
        Some(code) if code.starts_with("28") => EstablishErrorKind::Authentication,
        Some("53300" | "57P03") => EstablishErrorKind::Network,
        Some(_) => EstablishErrorKind::Other,
        // Closed by the server (or a cut) before or during startup: a
        // network error, as cmap-postgres sorts it (`PgError::kind`), not
        // one that clears the pool.
        None if matches!(error, PgError::Postgres(e) if e.is_closed()) => EstablishErrorKind::Network,
        None => EstablishErrorKind::of_chain(error),
    }
}

/// An async pool of `tokio_postgres::Client`s, on the current tokio runtime.
pub trait AsyncPgPool: Send + Sync + Sized + 'static {
    type Guard<'a>: DerefMut<Target = Client> + Send
    where
        Self: 'a;

    fn build(setup: &PgSetup) -> impl Future<Output = Self> + Send;

    /// A checkout; the error as the user would print it (`Display`).
    fn get(&self) -> impl Future<Output = Result<Self::Guard<'_>, String>> + Send;
}

// --- cmap-tokio ---

pub struct CmapManager {
    pub(crate) setup: PgSetup,
}

impl cmap_tokio::ManageConnection for CmapManager {
    type Connection = Client;
    type Error = PgError;
    const RESETS: bool = false;

    fn connect(&self) -> impl Future<Output = Result<Client, PgError>> + Send {
        connect(self.setup.clone())
    }

    fn classify(&self, error: &PgError) -> EstablishErrorKind {
        classify(error)
    }

    fn check(&self, conn: &mut Client) -> impl Future<Output = Result<(), PgError>> + Send {
        check(conn, self.setup.round_trip_check)
    }

    fn is_broken(&self, conn: &mut Client) -> bool {
        conn.is_closed()
    }
}

fn count_clears(counters: &Arc<Counters>) -> impl Fn(&Event) + Send + Sync + 'static {
    let counters = counters.clone();
    move |event| {
        if matches!(event, Event::PoolCleared { .. }) {
            counters.cleared.fetch_add(1, Ordering::Relaxed);
        }
    }
}

pub struct CmapTokio(pub cmap_tokio::Pool<CmapManager>);

impl AsyncPgPool for CmapTokio {
    type Guard<'a> = cmap_tokio::PooledConnection<'a, CmapManager>;

    async fn build(setup: &PgSetup) -> Self {
        let mut builder = cmap_tokio::Pool::builder()
            .address(("127.0.0.1:".to_owned() + &setup.port.to_string()).as_str())
            .max_pool_size(setup.max)
            .min_pool_size(setup.min)
            .on_event(count_clears(&setup.counters));
        if let Some(wait) = setup.wait {
            builder = builder.wait_queue_timeout(wait);
        }
        let manager = CmapManager { setup: setup.clone() };
        CmapTokio(builder.build(manager).expect("valid cmap-tokio options"))
    }

    fn get(&self) -> impl Future<Output = Result<Self::Guard<'_>, String>> + Send {
        let get = self.0.get();
        async move { get.await.map_err(|e| e.to_string()) }
    }
}

// --- deadpool ---

pub struct DeadpoolManager {
    setup: PgSetup,
}

impl deadpool::managed::Manager for DeadpoolManager {
    type Type = Client;
    type Error = PgError;

    fn create(&self) -> impl Future<Output = Result<Client, PgError>> + Send {
        connect(self.setup.clone())
    }

    async fn recycle(
        &self,
        conn: &mut Client,
        _: &deadpool::managed::Metrics,
    ) -> deadpool::managed::RecycleResult<PgError> {
        check(conn, self.setup.round_trip_check)
            .await
            .map_err(deadpool::managed::RecycleError::Backend)
    }
}

pub struct Deadpool(pub deadpool::managed::Pool<DeadpoolManager>);

impl AsyncPgPool for Deadpool {
    type Guard<'a> = deadpool::managed::Object<DeadpoolManager>;

    async fn build(setup: &PgSetup) -> Self {
        let pool = deadpool::managed::Pool::builder(DeadpoolManager { setup: setup.clone() })
            .max_size(setup.max as usize)
            .wait_timeout(setup.wait)
            .runtime(deadpool::Runtime::Tokio1)
            .build()
            .expect("valid deadpool options");
        Deadpool(pool)
    }

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| e.to_string())
    }
}

// --- bb8 ---

pub struct Bb8Manager {
    setup: PgSetup,
}

impl bb8::ManageConnection for Bb8Manager {
    type Connection = Client;
    type Error = PgError;

    fn connect(&self) -> impl Future<Output = Result<Client, PgError>> + Send {
        connect(self.setup.clone())
    }

    fn is_valid(&self, conn: &mut Client) -> impl Future<Output = Result<(), PgError>> + Send {
        check(conn, self.setup.round_trip_check)
    }

    fn has_broken(&self, conn: &mut Client) -> bool {
        conn.is_closed()
    }
}

pub struct Bb8(pub bb8::Pool<Bb8Manager>);

impl AsyncPgPool for Bb8 {
    type Guard<'a> = bb8::PooledConnection<'a, Bb8Manager>;

    async fn build(setup: &PgSetup) -> Self {
        let mut builder = bb8::Pool::builder()
            .max_size(setup.max)
            .min_idle((setup.min > 0).then_some(setup.min));
        if let Some(wait) = setup.wait {
            builder = builder.connection_timeout(wait);
        }
        // `build_unchecked`: no waiting for `min_idle` connections, as the
        // other pools' builds do not wait.
        Bb8(builder.build_unchecked(Bb8Manager { setup: setup.clone() }))
    }

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| e.to_string())
    }
}

// --- cmap-blocking, with the synchronous `postgres` crate ---

pub struct BlockingManager {
    pub(crate) setup: PgSetup,
}

impl cmap_blocking::ManageConnection for BlockingManager {
    type Connection = postgres::Client;
    type Error = PgError;
    const RESETS: bool = false;

    fn connect(&self) -> Result<postgres::Client, PgError> {
        let counters = &self.setup.counters;
        counters.started.fetch_add(1, Ordering::Relaxed);
        let start = Instant::now();
        let connected =
            postgres::Config::from(config(self.setup.port(), &self.setup.application_name)).connect(NoTls);
        counters.attempt(start, connected.is_ok());
        let client = connected?;
        counters.finished_now();
        Ok(client)
    }

    fn classify(&self, error: &PgError) -> EstablishErrorKind {
        classify(error)
    }

    fn check(&self, conn: &mut postgres::Client) -> Result<(), PgError> {
        self.check_within(conn, None)
    }

    /// The round trip bounded by what is left of the checkout's deadline,
    /// as a blocking check must be (the pool cannot cut it short).
    fn check_within(&self, conn: &mut postgres::Client, remaining: Option<Duration>) -> Result<(), PgError> {
        if conn.is_closed() {
            return Err(PgError::Closed);
        }
        if self.setup.round_trip_check {
            match remaining {
                Some(remaining) => conn.is_valid(remaining)?,
                None => drop(conn.simple_query("select 1")?),
            }
        }
        Ok(())
    }

    fn is_broken(&self, conn: &mut postgres::Client) -> bool {
        conn.is_closed()
    }
}

pub const CMAP_BLOCKING: &str = "cmap-blocking";

pub fn build_blocking(setup: &PgSetup) -> cmap_blocking::Pool<BlockingManager> {
    let mut builder = cmap_blocking::Pool::builder()
        .address(("127.0.0.1:".to_owned() + &setup.port.to_string()).as_str())
        .max_pool_size(setup.max)
        .min_pool_size(setup.min)
        .on_event(count_clears(&setup.counters));
    if let Some(wait) = setup.wait {
        builder = builder.wait_queue_timeout(wait);
    }
    builder
        .build(BlockingManager { setup: setup.clone() })
        .expect("valid cmap-blocking options")
}

/// The connect latency through the proxy: the median of `n` sequential
/// `tokio-postgres` connects (TCP, startup, authentication).
pub async fn connect_latency(port: u16, n: usize) -> Duration {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        match config(port, "bench-outage").connect(NoTls).await {
            Ok((client, connection)) => {
                times.push(t.elapsed());
                drop(client);
                let _ = connection.await;
            }
            Err(e) => eprintln!("connect latency: {e}"),
        }
    }
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}
