//! How the recorder writes what has no serde form of its own: instants (as
//! signed nanoseconds from the recording's base), establishment errors (as
//! their text, rebuilt on replay with the same `Display`, `Debug` and
//! source chain), and the few fields of the core whose shape JSON cannot
//! hold as is.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{ClearCause, EstablishError, EstablishErrorKind};

thread_local! {
    /// The instant written as 0 while a recording is written or read.
    static BASE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Runs `f` with instants written and read relative to `base`.
pub(crate) fn with_base<T>(base: Instant, f: impl FnOnce() -> T) -> T {
    let outer = BASE.with(|b| b.replace(Some(base)));
    let out = f();
    BASE.with(|b| b.set(outer));
    out
}

fn base() -> Option<Instant> {
    BASE.with(Cell::get)
}

/// `at` as nanoseconds from the base `with_base` set.
pub(crate) fn relative(at: Instant) -> i64 {
    nanos_from_base(base().expect("called inside with_base"), at)
}

/// An instant as signed nanoseconds from the base.
pub(crate) fn nanos_from_base(base: Instant, at: Instant) -> i64 {
    let nanos = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    match at.checked_duration_since(base) {
        Some(after) => nanos(after),
        None => -nanos(base - at),
    }
}

/// The instant `nanos` from the base, if the platform's clock can hold it.
pub(crate) fn instant_from_base(base: Instant, nanos: i64) -> Option<Instant> {
    let offset = Duration::from_nanos(nanos.unsigned_abs());
    if nanos >= 0 {
        base.checked_add(offset)
    } else {
        base.checked_sub(offset)
    }
}

/// `#[serde(with)]` for an `Instant`.
pub(crate) mod rel {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(at: &Instant, s: S) -> Result<S::Ok, S::Error> {
        let base = base().ok_or_else(|| S::Error::custom("no recording base"))?;
        s.serialize_i64(nanos_from_base(base, *at))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Instant, D::Error> {
        let nanos = i64::deserialize(d)?;
        let base = base().ok_or_else(|| D::Error::custom("no recording base"))?;
        instant_from_base(base, nanos).ok_or_else(|| D::Error::custom("an instant this clock cannot hold"))
    }
}

/// `#[serde(with)]` for an `Option<Instant>`.
pub(crate) mod rel_opt {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct At(#[serde(with = "rel")] Instant);

    pub(crate) fn serialize<S: Serializer>(at: &Option<Instant>, s: S) -> Result<S::Ok, S::Error> {
        at.map(At).serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Instant>, D::Error> {
        Ok(Option::<At>::deserialize(d)?.map(|At(at)| at))
    }
}

/// `#[serde(with)]` for the wait queue's deadline orders, `(Instant, id)`
/// pairs.
pub(crate) mod rel_pairs {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Pair<T>(#[serde(with = "rel")] Instant, T);

    pub(crate) fn serialize<'a, S, T, I>(pairs: I, s: S) -> Result<S::Ok, S::Error>
    where
        S: Serializer,
        T: Serialize + Copy + 'a,
        I: IntoIterator<Item = &'a (Instant, T)>,
    {
        s.collect_seq(pairs.into_iter().map(|&(at, t)| Pair(at, t)))
    }

    pub(crate) fn deserialize<'de, D, T, C>(d: D) -> Result<C, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de>,
        C: FromIterator<(Instant, T)>,
    {
        Ok(Vec::<Pair<T>>::deserialize(d)?
            .into_iter()
            .map(|Pair(at, t)| (at, t))
            .collect())
    }
}

/// `#[serde(with)]` for one optional `(Instant, id)` pair (the wait
/// queue's chain head).
pub(crate) mod rel_pair_opt {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Pair<T>(#[serde(with = "rel")] Instant, T);

    pub(crate) fn serialize<S, T>(pair: &Option<(Instant, T)>, s: S) -> Result<S::Ok, S::Error>
    where
        S: Serializer,
        T: Serialize + Copy,
    {
        pair.map(|(at, t)| Pair(at, t)).serialize(s)
    }

    pub(crate) fn deserialize<'de, D, T>(d: D) -> Result<Option<(Instant, T)>, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de>,
    {
        Ok(Option::<Pair<T>>::deserialize(d)?.map(|Pair(at, t)| (at, t)))
    }
}

/// `#[serde(with)]` for a map whose keys JSON cannot use as object keys:
/// a list of pairs.
pub(crate) mod pairs {
    use super::*;

    pub(crate) fn serialize<S, K, V>(map: &BTreeMap<K, V>, s: S) -> Result<S::Ok, S::Error>
    where
        S: Serializer,
        K: Serialize,
        V: Serialize,
    {
        s.collect_seq(map.iter())
    }

    pub(crate) fn deserialize<'de, D, K, V>(d: D) -> Result<BTreeMap<K, V>, D::Error>
    where
        D: Deserializer<'de>,
        K: Deserialize<'de> + Ord,
        V: Deserialize<'de>,
    {
        Ok(Vec::<(K, V)>::deserialize(d)?.into_iter().collect())
    }
}

/// `#[serde(with)]` for the spec options a user set: their names are the
/// spec's, read back as the same static names.
pub(crate) mod option_names {
    use super::*;
    use crate::options::SPEC_OPTIONS;

    pub(crate) fn serialize<S: Serializer>(set: &[(&'static str, u64)], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(set)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(&'static str, u64)>, D::Error> {
        Vec::<(String, u64)>::deserialize(d)?
            .into_iter()
            .map(|(name, value)| match SPEC_OPTIONS.iter().find(|n| **n == name) {
                Some(name) => Ok((*name, value)),
                None => Err(D::Error::custom(format!("unknown spec option {name:?}"))),
            })
            .collect()
    }
}

/// An establishment error as text: its kind, and its manager error's
/// `Display` and `Debug` with those of each source below it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ErrorText {
    pub(crate) kind: EstablishErrorKind,
    /// The manager's error, then its sources, outermost first.
    pub(crate) chain: Vec<Layer>,
}

/// One error of a source chain, as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Layer {
    pub(crate) display: String,
    pub(crate) debug: String,
}

impl ErrorText {
    pub(crate) fn of(error: &EstablishError) -> ErrorText {
        let mut chain = Vec::new();
        let mut layer: Option<&(dyn std::error::Error + 'static)> = Some(error.get_ref());
        while let Some(e) = layer {
            chain.push(Layer {
                display: e.to_string(),
                debug: format!("{e:?}"),
            });
            layer = e.source();
        }
        ErrorText {
            kind: error.kind(),
            chain,
        }
    }

    /// An error that reads exactly as the recorded one.
    pub(crate) fn rebuild(&self) -> EstablishError {
        let replayed = self
            .chain
            .iter()
            .rev()
            .fold(None, |source, layer| {
                Some(Replayed {
                    layer: layer.clone(),
                    source: source.map(Box::new),
                })
            })
            .unwrap_or_else(|| Replayed {
                layer: Layer {
                    display: String::new(),
                    debug: String::new(),
                },
                source: None,
            });
        EstablishError::new(self.kind, replayed)
    }
}

/// A recorded error on replay: the same text, and the same chain.
struct Replayed {
    layer: Layer,
    source: Option<Box<Replayed>>,
}

impl fmt::Display for Replayed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.layer.display)
    }
}

impl fmt::Debug for Replayed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.layer.debug)
    }
}

impl std::error::Error for Replayed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|s| s as _)
    }
}

/// `#[serde(with)]` for an `Option<EstablishError>`.
pub(crate) mod error_opt {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(error: &Option<EstablishError>, s: S) -> Result<S::Ok, S::Error> {
        error.as_ref().map(ErrorText::of).serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<EstablishError>, D::Error> {
        Ok(Option::<ErrorText>::deserialize(d)?.map(|e| e.rebuild()))
    }
}

/// `#[serde(with)]` for an `EstablishError`, as its [`ErrorText`].
pub(crate) mod error_text {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(error: &EstablishError, s: S) -> Result<S::Ok, S::Error> {
        ErrorText::of(error).serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<EstablishError, D::Error> {
        Ok(ErrorText::deserialize(d)?.rebuild())
    }
}

/// `#[serde(with)]` for a checked-out connection: its metadata only, read
/// back around `C::default()` (a replay's pool holds `()`s) and of no
/// pool until the replay adopts it.
pub(crate) mod pooled {
    use super::*;
    use crate::connection::{Meta, Pooled};

    pub(crate) fn serialize<S: Serializer, C>(connection: &Pooled<C>, s: S) -> Result<S::Ok, S::Error> {
        connection.meta.serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>, C: Default>(d: D) -> Result<Pooled<C>, D::Error> {
        Ok(Pooled {
            meta: Box::new(Meta::deserialize(d)?),
            conn: C::default(),
        })
    }
}

/// [`ClearCause`] as JSON.
#[derive(Serialize, Deserialize)]
enum CauseText {
    NeverReady,
    Cleared(Option<String>),
    EstablishFailed(ErrorText),
    Interrupted,
    Forked,
}

/// `#[serde(with)]` for a [`ClearCause`].
pub(crate) mod clear_cause {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(cause: &ClearCause, s: S) -> Result<S::Ok, S::Error> {
        match cause {
            ClearCause::NeverReady => CauseText::NeverReady,
            ClearCause::Cleared(why) => CauseText::Cleared(why.as_deref().map(str::to_owned)),
            ClearCause::EstablishFailed(error) => CauseText::EstablishFailed(ErrorText::of(error)),
            ClearCause::Interrupted => CauseText::Interrupted,
            ClearCause::Forked => CauseText::Forked,
        }
        .serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ClearCause, D::Error> {
        Ok(match CauseText::deserialize(d)? {
            CauseText::NeverReady => ClearCause::NeverReady,
            CauseText::Cleared(why) => ClearCause::Cleared(why.map(Arc::from)),
            CauseText::EstablishFailed(error) => ClearCause::EstablishFailed(error.rebuild()),
            CauseText::Interrupted => ClearCause::Interrupted,
            CauseText::Forked => ClearCause::Forked,
        })
    }
}

/// An address as its host and port.
impl Serialize for crate::Address {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (self.host(), self.port()).serialize(s)
    }
}

impl<'de> Deserialize<'de> for crate::Address {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (host, port) = <(String, Option<u16>)>::deserialize(d)?;
        Ok(match port {
            Some(port) => crate::Address::new(host, port),
            None => crate::Address::unix(host),
        })
    }
}
