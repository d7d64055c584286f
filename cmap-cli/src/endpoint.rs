//! The simulated server endpoint: what a connection's handshake meets when
//! the test's `failPoint` is applied to it.
//!
//! Every handshake sends the same commands in order: `hello` (which a
//! failPoint may also name by its legacy name `isMaster`), then the
//! authentication conversation `saslStart` and `saslContinue`. A failPoint
//! fires on a command it lists while its mode allows, as the server's
//! `failCommand` does: it delays the command by `blockTimeMS`, then closes
//! the connection (a network error) or answers with `errorCode`. `times`
//! counts the commands it fired on, across the whole test.
//!
//! The endpoint only *decides* (how long, and what outcome); it never
//! sleeps, so the virtual-time engine and a real-time adapter can both use
//! it.

use std::fmt;
use std::time::Duration;

use cmap_core::EstablishErrorKind;

use crate::format::{FailPoint, FailPointMode};

/// The handshake's commands, and whether each belongs to authentication.
const HANDSHAKE: [(&str, bool); 3] = [("hello", false), ("saslStart", true), ("saslContinue", true)];

/// Why a simulated handshake failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointError {
    /// The server closed the connection during `command`.
    Network {
        /// The command that met the failPoint.
        command: &'static str,
    },
    /// The authentication conversation failed with `code` (18 is
    /// `AuthenticationFailed`).
    Authentication {
        /// The command that met the failPoint.
        command: &'static str,
        /// The server's error code.
        code: i64,
    },
    /// The handshake command failed with `code`.
    Command {
        /// The command that met the failPoint.
        command: &'static str,
        /// The server's error code.
        code: i64,
    },
}

impl EndpointError {
    /// What kind of establishment failure it is (spec: "Backpressure-
    /// enabled"): a network error during the `hello` may come from
    /// overload; one during the authentication after it, an
    /// authentication error, and an error the server answered with may
    /// not.
    pub fn kind(&self) -> EstablishErrorKind {
        match self {
            EndpointError::Network { command } if !is_auth(command) => EstablishErrorKind::Network,
            EndpointError::Network { .. } | EndpointError::Authentication { .. } => {
                EstablishErrorKind::Authentication
            }
            EndpointError::Command { .. } => EstablishErrorKind::Other,
        }
    }

    /// The error type name as the CMAP test files spell it (`error.type`).
    pub fn type_name(&self) -> &'static str {
        match self {
            EndpointError::Network { .. } => "Network",
            EndpointError::Authentication { .. } => "AuthenticationError",
            EndpointError::Command { .. } => "CommandError",
        }
    }
}

impl fmt::Display for EndpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndpointError::Network { command } => {
                write!(f, "connection closed by the server during {command}")
            }
            EndpointError::Authentication { command, code } => {
                write!(f, "authentication failed: {command} returned error code {code}")
            }
            EndpointError::Command { command, code } => write!(f, "{command} failed with error code {code}"),
        }
    }
}

impl std::error::Error for EndpointError {}

/// Whether `command` belongs to the authentication after the `hello`.
fn is_auth(command: &str) -> bool {
    HANDSHAKE.iter().any(|&(c, auth)| auth && c == command)
}

/// What one handshake does: take `delay`, then end with `outcome`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    /// How long the handshake takes (the sum of the blocked commands).
    pub delay: Duration,
    /// Its result.
    pub outcome: Result<(), EndpointError>,
}

/// The endpoint of one test: its failPoint and how often it has fired.
#[derive(Debug, Clone, Default)]
pub struct Endpoint {
    fail_point: Option<FailPoint>,
    fired: u64,
}

impl Endpoint {
    /// An endpoint applying `fail_point` (none: every handshake succeeds at
    /// once).
    pub fn new(fail_point: Option<FailPoint>) -> Endpoint {
        Endpoint { fail_point, fired: 0 }
    }

    /// Runs one connection's handshake against the failPoint.
    pub fn handshake(&mut self) -> Handshake {
        let mut delay = Duration::ZERO;
        for (command, auth) in HANDSHAKE {
            if !self.fire(command) {
                continue;
            }
            let Some(fp) = &self.fail_point else { continue };
            delay += fp.block.unwrap_or_default();
            let failure = if fp.close_connection {
                Some(EndpointError::Network { command })
            } else {
                fp.error_code.map(|code| match auth {
                    true => EndpointError::Authentication { command, code },
                    false => EndpointError::Command { command, code },
                })
            };
            if let Some(error) = failure {
                return Handshake {
                    delay,
                    outcome: Err(error),
                };
            }
        }
        Handshake {
            delay,
            outcome: Ok(()),
        }
    }

    /// Replaces the failPoint, as a unified test's `failPoint` operation
    /// does; `times` counts from zero again.
    pub fn set_fail_point(&mut self, fail_point: Option<FailPoint>) {
        self.fail_point = fail_point;
        self.fired = 0;
    }

    /// Whether the failPoint would fire now on `command` (without counting
    /// it). The endpoint simulates only handshakes; a runner asks this
    /// before a command it cannot simulate meets the failPoint.
    pub fn would_fire(&self, command: &str) -> bool {
        self.fail_point
            .as_ref()
            .is_some_and(|fp| Endpoint::lists(fp, command) && self.allows(fp))
    }

    /// Whether `command` is one of the handshake's.
    pub fn is_handshake(command: &str) -> bool {
        HANDSHAKE.iter().any(|(c, _)| *c == command) || matches!(command, "isMaster" | "ismaster")
    }

    fn lists(fp: &FailPoint, command: &str) -> bool {
        fp.fail_commands
            .iter()
            .any(|c| c == command || (command == "hello" && (c == "isMaster" || c == "ismaster")))
    }

    fn allows(&self, fp: &FailPoint) -> bool {
        match fp.mode {
            FailPointMode::AlwaysOn => true,
            FailPointMode::Off => false,
            FailPointMode::Times(n) => self.fired < n,
        }
    }

    /// Whether the failPoint fires on `command` now (counting it).
    fn fire(&mut self, command: &str) -> bool {
        let Some(fp) = &self.fail_point else { return false };
        let fires = Endpoint::lists(fp, command) && self.allows(fp);
        if fires {
            self.fired += 1;
        }
        fires
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(mode: FailPointMode, commands: &[&str]) -> FailPoint {
        FailPoint {
            mode,
            fail_commands: commands.iter().map(|c| c.to_string()).collect(),
            close_connection: false,
            block: None,
            error_code: None,
        }
    }

    #[test]
    fn without_fail_point_handshakes_succeed_at_once() {
        let hs = Endpoint::new(None).handshake();
        assert_eq!(hs.delay, Duration::ZERO);
        assert_eq!(hs.outcome, Ok(()));
    }

    #[test]
    fn times_counts_across_handshakes() {
        let mut fail = fp(FailPointMode::Times(2), &["isMaster", "hello"]);
        fail.close_connection = true;
        fail.block = Some(Duration::from_millis(5));
        let mut ep = Endpoint::new(Some(fail));
        for _ in 0..2 {
            let hs = ep.handshake();
            assert_eq!(hs.delay, Duration::from_millis(5));
            assert_eq!(hs.outcome, Err(EndpointError::Network { command: "hello" }));
        }
        assert_eq!(ep.handshake().outcome, Ok(()));
    }

    #[test]
    fn block_only_delays_and_succeeds() {
        let mut blocking = fp(FailPointMode::AlwaysOn, &["hello"]);
        blocking.block = Some(Duration::from_millis(500));
        let mut ep = Endpoint::new(Some(blocking));
        for _ in 0..3 {
            let hs = ep.handshake();
            assert_eq!((hs.delay, hs.outcome), (Duration::from_millis(500), Ok(())));
        }
    }

    #[test]
    fn auth_step_failures_are_authentication_errors() {
        let mut auth = fp(FailPointMode::Times(1), &["saslContinue"]);
        auth.error_code = Some(18);
        let mut ep = Endpoint::new(Some(auth));
        let err = ep.handshake().outcome.unwrap_err();
        assert_eq!(err.type_name(), "AuthenticationError");
        assert_eq!(ep.handshake().outcome, Ok(()));

        let mut hello = fp(FailPointMode::AlwaysOn, &["hello"]);
        hello.error_code = Some(91);
        let err = Endpoint::new(Some(hello)).handshake().outcome.unwrap_err();
        assert_eq!(
            err,
            EndpointError::Command {
                command: "hello",
                code: 91
            }
        );
        assert_eq!(err.type_name(), "CommandError");
    }

    #[test]
    fn a_new_fail_point_counts_again_and_would_fire_counts_nothing() {
        let mut once = fp(FailPointMode::Times(1), &["saslContinue", "listDatabases"]);
        once.close_connection = true;
        let mut ep = Endpoint::new(None);
        assert!(!ep.would_fire("listDatabases"));
        ep.set_fail_point(Some(once.clone()));
        assert!(ep.would_fire("listDatabases") && ep.would_fire("listDatabases"));
        assert!(!ep.would_fire("endSessions"));
        assert!(ep.handshake().outcome.is_err());
        assert!(!ep.would_fire("listDatabases"), "times: 1 is used up");
        ep.set_fail_point(Some(once));
        assert!(ep.would_fire("listDatabases"));
        assert!(Endpoint::is_handshake("saslStart") && Endpoint::is_handshake("isMaster"));
        assert!(!Endpoint::is_handshake("ping"));
    }

    #[test]
    fn only_network_errors_before_authentication_may_be_overload() {
        let network = |command| EndpointError::Network { command }.kind();
        assert_eq!(network("hello"), EstablishErrorKind::Network);
        assert_eq!(network("saslContinue"), EstablishErrorKind::Authentication);
        let auth = EndpointError::Authentication {
            command: "saslStart",
            code: 18,
        };
        assert_eq!(auth.kind(), EstablishErrorKind::Authentication);
        let command = EndpointError::Command {
            command: "hello",
            code: 91,
        };
        assert_eq!(command.kind(), EstablishErrorKind::Other);
    }

    #[test]
    fn off_never_fires() {
        let mut off = fp(FailPointMode::Off, &["hello"]);
        off.close_connection = true;
        assert_eq!(Endpoint::new(Some(off)).handshake().outcome, Ok(()));
    }
}
