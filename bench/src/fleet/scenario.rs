//! What is simulated: the fleet's load, the server, the scenario (what
//! happens when) and the variant (which of the pool's mechanisms is
//! switched off), and the pool options each variant gives every process.

use std::time::Duration;

use cmap_core::{AdaptiveConnecting, EstablishErrorKind, PoolOptions};

use super::sched::{Nanos, MS, SEC};

/// Each process's load.
#[derive(Clone, Debug)]
pub struct Load {
    /// Requests per second per process (Poisson arrivals).
    pub rate: f64,
    /// Mean time a request holds its connection (exponential).
    pub hold: Nanos,
    /// How long a request may wait for a connection, retries included
    /// (the pool's `waitQueueTimeoutMS`).
    pub wait_timeout: Nanos,
}

/// The simulated server.
#[derive(Clone, Debug)]
pub struct ServerModel {
    /// Connect + handshake + authentication, mean.
    pub connect: Nanos,
    /// The connect time spread uniformly by ± this fraction of itself.
    pub connect_jitter: f64,
    /// How long a refused connect takes to fail at the client.
    pub refuse: Nanos,
    /// The most connections it holds (handshaking ones included); past
    /// it, connects are refused.
    pub max_connections: usize,
    /// The ingress rate limiter: new connections per second (a token
    /// bucket refilled at this rate)...
    pub accept_rate: f64,
    /// ...holding at most this many tokens (the burst it accepts at once).
    pub accept_burst: f64,
}

/// How each SDAM-like monitor of a process watches the server.
#[derive(Clone, Debug)]
pub struct Monitor {
    /// The heartbeat while the server is known (heartbeatFrequencyMS).
    pub heartbeat: Nanos,
    /// The re-check while it is unknown (minHeartbeatFrequencyMS).
    pub min_heartbeat: Nanos,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Steady,
    Failover,
    Deploy,
    Spike,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Steady, Kind::Failover, Kind::Deploy, Kind::Spike];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Steady => "steady",
            Kind::Failover => "failover",
            Kind::Deploy => "deploy",
            Kind::Spike => "spike",
        }
    }

    pub fn parse(s: &str) -> Result<Kind, String> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown scenario {s:?} (steady, failover, deploy, spike)"))
    }
}

/// When things happen. Times are from the start of the run.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub kind: Kind,
    /// The event's start: the server goes down, the first wave restarts,
    /// the spike begins.
    pub at: Nanos,
    /// Failover: how long the server refuses.
    pub down_for: Nanos,
    /// Spike: how long it lasts, and the load multiplier.
    pub spike_for: Nanos,
    pub factor: f64,
    /// Deploy: waves, the pause between two waves, and how long a
    /// restarting process is down.
    pub waves: usize,
    pub wave_every: Nanos,
    pub restart: Nanos,
}

impl Scenario {
    /// The load multiplier at `t`, and when it next changes.
    pub fn load_at(&self, t: Nanos) -> (f64, Option<Nanos>) {
        if self.kind != Kind::Spike {
            return (1.0, None);
        }
        let end = self.at + self.spike_for;
        if t < self.at {
            (1.0, Some(self.at))
        } else if t < end {
            (self.factor, Some(end))
        } else {
            (1.0, None)
        }
    }

    /// One line on what happens, for the report.
    pub fn describe(&self, processes: usize) -> String {
        let s = |n: Nanos| format!("{} s", n as f64 / SEC as f64);
        match self.kind {
            Kind::Steady => "constant load, nothing happens".to_owned(),
            Kind::Failover => format!(
                "at {} the server drops every connection and refuses connects for {}, then accepts again",
                s(self.at),
                s(self.down_for)
            ),
            Kind::Deploy => format!(
                "from {}, {} waves {} apart each restart {} processes (the old pool closed, a new one \
built {} later)",
                s(self.at),
                self.waves,
                s(self.wave_every),
                processes.div_ceil(self.waves),
                s(self.restart)
            ),
            Kind::Spike => format!(
                "at {} the load is multiplied by {} for {}",
                s(self.at),
                self.factor,
                s(self.spike_for)
            ),
        }
    }
}

/// Which of the pool's mechanisms is switched off, or which option is
/// tried instead of the defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The pool as `cmap_async::Pool::builder()` builds it.
    Defaults,
    /// maxConnecting = maxPoolSize: no limit on connects at once.
    NoMaxConnecting,
    /// Every process draws the same reconnect-backoff spread (one seed
    /// for all): the pools' retries are not spread apart.
    NoJitter,
    /// Refused connects carry no backpressure labels: they clear the pool,
    /// as before the spec's "Backpressure-enabled" (SDAM's reaction to a
    /// network error while connecting).
    NoLabels,
    /// The adaptive establishment pace (`adaptive_connecting`) from
    /// maxConnecting up to maxPoolSize, instead of the fixed maxConnecting.
    Adaptive,
}

impl Variant {
    pub const ALL: [Variant; 5] = [
        Variant::Defaults,
        Variant::NoMaxConnecting,
        Variant::NoJitter,
        Variant::NoLabels,
        Variant::Adaptive,
    ];

    /// Whether the variant switches a mechanism off (a row of "what each
    /// mechanism buys"), rather than trying an option.
    pub fn is_without(self) -> bool {
        !matches!(self, Variant::Defaults | Variant::Adaptive)
    }

    pub fn name(self) -> &'static str {
        match self {
            Variant::Defaults => "defaults",
            Variant::NoMaxConnecting => "no maxConnecting",
            Variant::NoJitter => "no jitter",
            Variant::NoLabels => "no labels",
            Variant::Adaptive => "adaptive pace",
        }
    }

    pub fn slug(self) -> &'static str {
        match self {
            Variant::Defaults => "defaults",
            Variant::NoMaxConnecting => "no-max-connecting",
            Variant::NoJitter => "no-jitter",
            Variant::NoLabels => "no-labels",
            Variant::Adaptive => "adaptive",
        }
    }

    pub fn parse(s: &str) -> Result<Variant, String> {
        Variant::ALL
            .into_iter()
            .find(|v| v.slug() == s || v.name() == s)
            .ok_or_else(|| {
                format!("unknown variant {s:?} (defaults, no-max-connecting, no-jitter, no-labels, adaptive)")
            })
    }

    /// The kind of error a refused connect is reported with: a network
    /// error, which the core labels `SystemOverloadedError` and
    /// `RetryableError` (spec: "Backpressure-enabled"), or, without the
    /// labels, an unlabelled one, which clears the pool.
    pub fn refusal_kind(self) -> EstablishErrorKind {
        match self {
            Variant::NoLabels => EstablishErrorKind::Other,
            _ => EstablishErrorKind::Network,
        }
    }
}

/// The pool's sizes.
#[derive(Clone, Debug)]
pub struct Sizes {
    pub max_pool_size: u32,
    pub min_pool_size: u32,
    pub max_connecting: u32,
}

/// Everything one run needs.
#[derive(Clone, Debug)]
pub struct Config {
    pub processes: usize,
    pub duration: Nanos,
    pub seed: u64,
    /// The processes start one after the other, evenly over this long
    /// from 0 (a fleet coming up, not one instant's storm).
    pub ramp: Nanos,
    /// Figures before this instant (the fleet's start) stay out of the
    /// tables; the plots show them.
    pub warmup: Nanos,
    /// The width of a wait-time percentile bucket.
    pub bucket: Nanos,
    pub load: Load,
    pub server: ServerModel,
    pub monitor: Monitor,
    pub sizes: Sizes,
    /// The reconnect backoff's longest pause between attempts while
    /// checkouts wait (`Reconnect::max_delay_while_waiting`); `None`: the
    /// builder's default.
    pub waiting_pause: Option<Nanos>,
    pub scenario: Scenario,
    pub variant: Variant,
}

/// The fixed seed every pool gets in the no-jitter variant.
const SHARED_SEED: u64 = 0x5EED;

impl Config {
    /// The options of a process's pool: what `cmap_async::Pool::builder()`
    /// sets (the reconnect backoff, waiting through network failures, a
    /// seed per pool), with the sizes and wait timeout of this run, and
    /// the variant's change. `seed`: the pool's own draw.
    pub fn pool_options(&self, seed: u64) -> PoolOptions {
        let s = &self.sizes;
        let max_connecting = match self.variant {
            Variant::NoMaxConnecting => s.max_pool_size.max(1),
            _ => s.max_connecting,
        };
        let seed = match self.variant {
            Variant::NoJitter => SHARED_SEED,
            _ => seed,
        };
        let mut reconnect = cmap_async::default_reconnect();
        if let Some(pause) = self.waiting_pause {
            reconnect.max_delay_while_waiting = Duration::from_nanos(pause.max(1));
        }
        let adaptive = (self.variant == Variant::Adaptive).then(|| AdaptiveConnecting {
            min: s.max_connecting,
            max: s.max_pool_size.max(s.max_connecting),
        });
        PoolOptions::builder()
            .max_pool_size(s.max_pool_size)
            .min_pool_size(s.min_pool_size)
            .max_connecting(max_connecting)
            .adaptive_connecting(adaptive)
            .wait_queue_timeout(Duration::from_nanos(self.load.wait_timeout))
            .reconnect(Some(reconnect))
            .keep_waiting_on_overload(true)
            .seed(seed)
            .build()
            .expect("valid pool options")
    }
}

/// The defaults of `bench fleet`, before the command line.
pub fn default_config() -> Config {
    Config {
        processes: 1000,
        duration: 300 * SEC,
        seed: 1,
        ramp: 30 * SEC,
        warmup: 60 * SEC,
        bucket: 10 * SEC,
        load: Load {
            rate: 20.0,
            hold: 50 * MS,
            wait_timeout: 5 * SEC,
        },
        server: ServerModel {
            connect: 20 * MS,
            connect_jitter: 0.5,
            refuse: MS,
            max_connections: 20_000,
            accept_rate: 1000.0,
            accept_burst: 1000.0,
        },
        monitor: Monitor {
            heartbeat: 10 * SEC,
            min_heartbeat: 500 * MS,
        },
        sizes: Sizes {
            max_pool_size: 100,
            min_pool_size: 0,
            max_connecting: 2,
        },
        waiting_pause: None,
        scenario: Scenario {
            kind: Kind::Steady,
            at: 120 * SEC,
            down_for: 10 * SEC,
            spike_for: 60 * SEC,
            factor: 5.0,
            waves: 2,
            wave_every: 60 * SEC,
            restart: 5 * SEC,
        },
        variant: Variant::Defaults,
    }
}
