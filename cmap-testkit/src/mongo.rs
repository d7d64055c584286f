//! The MongoDB-compatible servers `.ci/ferretdb.sh` starts (FerretDB
//! v1.24.2 on its SQLite backend), and whether the tests that need them
//! run.

/// The server with authentication on: user `cmap`, password
/// `cmap-secret`, in database `test` (`hello` and `ping` answer without
/// authenticating too).
pub const AUTH_ADDR: &str = "127.0.0.1:27017";

/// [`AUTH_ADDR`] as a connection string with the test user's credentials.
pub const AUTH_URI: &str = "mongodb://cmap:cmap-secret@127.0.0.1:27017/test";

/// The server without authentication.
pub const OPEN_ADDR: &str = "127.0.0.1:27018";

/// Where each server serves its Prometheus metrics (`/debug/metrics`):
/// [`AUTH_ADDR`]'s, then [`OPEN_ADDR`]'s.
pub const METRICS_ADDRS: [&str; 2] = ["127.0.0.1:28017", "127.0.0.1:28018"];

/// Whether the server tests run (`CMAP_MONGO_TESTS=1`; CI sets it); says
/// why not, past the test harness's output capture.
pub fn server_tests_enabled(test: &str) -> bool {
    crate::gate::server_tests(
        "CMAP_MONGO_TESTS",
        &format!("FerretDB at {AUTH_ADDR} and {OPEN_ADDR} (bash .ci/ferretdb.sh starts them)"),
        test,
    )
}

/// A FerretDB of a test's own, on free loopback ports, without
/// authentication: a server the test may kill and restart, and whose
/// connections no other test opens. The binary is the one
/// `.ci/ferretdb.sh` built (`CMAP_FERRETDB_BIN`, or its cache path).
/// Dropping it kills the server.
pub struct OwnFerretDb {
    binary: std::path::PathBuf,
    dir: std::path::PathBuf,
    port: u16,
    metrics_port: u16,
    log_args: Vec<&'static str>,
    child: Option<std::process::Child>,
}

impl OwnFerretDb {
    /// Starts one and waits until it answers.
    ///
    /// # Panics
    ///
    /// If the binary is missing or the server does not start in 30 s.
    pub fn start(name: &str) -> OwnFerretDb {
        OwnFerretDb::start_with(name, &["--log-level=WARN"])
    }

    /// [`start`](Self::start), logging every request it receives (JSON
    /// records at DEBUG, one a line): [`log`](Self::log) shows them.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub fn start_logging_requests(name: &str) -> OwnFerretDb {
        OwnFerretDb::start_with(name, &["--log-level=DEBUG", "--log-format=json"])
    }

    fn start_with(name: &str, log_args: &[&'static str]) -> OwnFerretDb {
        let binary = std::env::var_os("CMAP_FERRETDB_BIN").map_or_else(
            || {
                let home = std::env::var_os("HOME").unwrap_or_default();
                std::path::Path::new(&home).join(".cache/cmap-pool/ferretdb-v1.24.2")
            },
            Into::into,
        );
        assert!(
            binary.exists(),
            "no FerretDB binary at {} (bash .ci/ferretdb.sh builds it)",
            binary.display()
        );
        let dir = std::env::temp_dir().join(format!("cmap-own-ferretdb-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a data folder");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut server = OwnFerretDb {
            binary,
            dir,
            port: free_port(),
            metrics_port: free_port(),
            log_args: log_args.to_vec(),
            child: None,
        };
        server.restart();
        // The probe connection finished: counts start from zero.
        while server.open_connections() != 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "FerretDB still counts its probe connection open"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        server
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server at once: its connections are cut and new ones
    /// refused.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same ports and waits until it answers.
    ///
    /// # Panics
    ///
    /// If it does not answer within 30 s.
    pub fn restart(&mut self) {
        self.kill();
        let log = std::fs::File::create(self.dir.join("ferretdb.log")).expect("a log file");
        let child = std::process::Command::new(&self.binary)
            .arg("--handler=sqlite")
            .arg(format!("--sqlite-url=file:{}/", self.dir.display()))
            .arg(format!("--state-dir={}", self.dir.display()))
            .arg(format!("--listen-addr=127.0.0.1:{}", self.port))
            .arg(format!("--debug-addr=127.0.0.1:{}", self.metrics_port))
            .arg("--telemetry=disable")
            .args(&self.log_args)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().expect("a log file"))
            .stderr(log)
            .spawn()
            .expect("FerretDB starts");
        self.child = Some(child);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        // The server, then its metrics endpoint, which starts apart: one
        // probe of the server that succeeds, so that tests counting its
        // connections see one at most, and only until it is finished.
        for port in [self.port, self.metrics_port] {
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "FerretDB did not answer on port {port} (log: {})",
                    self.dir.join("ferretdb.log").display()
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }

    /// What the server has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("ferretdb.log")).unwrap_or_default()
    }

    /// Client connections the server holds open now: accepted minus
    /// finished, from its Prometheus metrics (failed accepts, counted
    /// apart, never finish).
    pub fn open_connections(&self) -> i64 {
        self.metric("ferretdb_client_accepts_total{error=\"0\"")
            - self.metric("ferretdb_client_duration_seconds_count")
    }

    /// How many `command` requests the server has received (`ping`,
    /// `isMaster`, ...), from its metrics.
    pub fn requests(&self, command: &str) -> i64 {
        self.metric(&format!("ferretdb_client_requests_total{{command=\"{command}\""))
    }

    /// The sum of the metric lines that start with `prefix`.
    fn metric(&self, prefix: &str) -> i64 {
        http_get(("127.0.0.1", self.metrics_port), "/debug/metrics")
            .lines()
            .filter(|line| line.starts_with(prefix))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as i64
    }
}

impl Drop for OwnFerretDb {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The body of a plain HTTP/1.0 GET.
fn http_get(addr: (&str, u16), path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("the metrics endpoint");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").expect("a request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("a response");
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

/// The TLS listener of the server without authentication, by the name its
/// certificate carries.
pub const TLS_HOST_PORT: &str = "localhost:27019";

/// The folder of the test certificates `.ci/tls.sh` makes: `ca.pem`,
/// `server.pem`, `server.key` (`CMAP_TLS_DIR`, or its cache path).
pub fn tls_dir() -> std::path::PathBuf {
    std::env::var_os("CMAP_TLS_DIR").map_or_else(
        || {
            let home = std::env::var_os("HOME").unwrap_or_default();
            std::path::Path::new(&home).join(".cache/cmap-pool/tls")
        },
        Into::into,
    )
}
