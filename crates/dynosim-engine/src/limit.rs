//! Concurrency limits (`router.concurrency_limit`, `app.concurrency_limit`): a limiter admits a
//! request while fewer than its limit are in flight through it and rejects it at once
//! otherwise (503, `limit_rejected`); an adaptive limit moves with each completed request's
//! latency. The algorithms and their defaults are Netflix's concurrency-limits
//! (Netflix/concurrency-limits, `concurrency-limits-core/src/main/java/com/netflix/concurrency/
//! limits/limit/`):
//!
//! - `fixed`: `FixedLimit.of(limit)`: the limit never moves.
//! - `aimd`: `AIMDLimit`: a sample that was dropped, or took longer than `timeout`, multiplies
//!   the limit by `backoff_ratio` (truncated); any other adds 1 if at least half the limit
//!   was in flight when the request was admitted; then clamped to [`min_limit`, `max_limit`].
//! - `gradient2`: `Gradient2Limit`: the gradient of a long exponential average of the
//!   latency (`long_window` samples, the first 10 a plain mean, `ExpAvgMeasurement`) over the
//!   sample's, times `rtt_tolerance`, clamped to [0.5, 1]; new = limit × gradient +
//!   `queue_size`, smoothed by `smoothing`, clamped. It does not grow while fewer than half
//!   the limit are in flight, and decays the long average by 5% whenever it is over twice the
//!   sample.
//! - `vegas`: `VegasLimit` (TCP Vegas): the queue is ⌈limit × (1 − rtt_noload / rtt)⌉,
//!   rtt_noload the least latency seen since the last probe (a probe every U(0.5, 1) ×
//!   `probe_multiplier` × limit samples takes the sample as the new rtt_noload); the limit
//!   grows by β while the queue is at most log10(limit), by log10(limit) below α, falls by
//!   log10(limit) above β or on a drop, then is smoothed by `smoothing`. α = 3 log10(limit) and
//!   β = 6 log10(limit) (log10 floored, at least 1) unless set.
//!
//! The limiter is `SimpleLimiter` (`limiter/SimpleLimiter.java`, `AbstractLimiter.java`): a
//! request is admitted iff the requests in flight are fewer than the limit; each sample carries
//! its latency and the requests in flight when it was admitted (itself included). A limit
//! that falls below the requests in flight admits nothing until they are fewer.
//! The replication's limiters are `sim::limit`.

use crate::error::{Error, Result};
use crate::params::Params;
use crate::registry::Registry;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `router.concurrency_limit` or `app.concurrency_limit` as written.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct LimitSpec {
    /// "fixed", "aimd", "gradient2" or "vegas" ([`REGISTRY`]).
    pub algorithm: String,
    #[serde(flatten)]
    pub params: Map<String, Value>,
}

/// Netflix's defaults (each `Builder`'s fields).
pub const AIMD_INITIAL: u32 = 20;
pub const AIMD_MIN: u32 = 20;
pub const AIMD_MAX: u32 = 200;
pub const AIMD_BACKOFF_RATIO: f64 = 0.9;
pub const AIMD_TIMEOUT: f64 = 5.0;
pub const GRADIENT2_INITIAL: u32 = 20;
pub const GRADIENT2_MIN: u32 = 20;
pub const GRADIENT2_MAX: u32 = 200;
pub const GRADIENT2_SMOOTHING: f64 = 0.2;
pub const GRADIENT2_QUEUE_SIZE: u32 = 4;
pub const GRADIENT2_LONG_WINDOW: u32 = 600;
pub const GRADIENT2_RTT_TOLERANCE: f64 = 1.5;
/// `ExpAvgMeasurement`'s warm-up in `Gradient2Limit`: the first samples' plain mean.
pub const GRADIENT2_WARMUP: u32 = 10;
pub const VEGAS_INITIAL: u32 = 20;
pub const VEGAS_MAX: u32 = 1000;
pub const VEGAS_SMOOTHING: f64 = 1.0;
pub const VEGAS_PROBE_MULTIPLIER: u32 = 30;
/// The largest limit taken.
pub const MAX_LIMIT: i64 = 1_000_000;

/// An algorithm's builder.
pub type Builder = fn(&Params) -> Result<ConcurrencyLimit>;

/// The algorithms: a new one is a builder and a line here.
pub const REGISTRY: Registry<Builder> = Registry(&[
    ("fixed", &["limit"], fixed),
    (
        "aimd",
        &[
            "initial_limit",
            "min_limit",
            "max_limit",
            "backoff_ratio",
            "timeout",
        ],
        aimd,
    ),
    (
        "gradient2",
        &[
            "initial_limit",
            "min_limit",
            "max_limit",
            "smoothing",
            "queue_size",
            "long_window",
            "rtt_tolerance",
        ],
        gradient2,
    ),
    (
        "vegas",
        &[
            "initial_limit",
            "max_limit",
            "smoothing",
            "alpha",
            "beta",
            "probe_multiplier",
        ],
        vegas,
    ),
]);

/// A limit's algorithm and settings, built; [`LimitState::new`] makes a limiter's own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConcurrencyLimit {
    Fixed {
        limit: u32,
    },
    Aimd {
        initial: u32,
        min: u32,
        max: u32,
        backoff_ratio: f64,
        /// Seconds: a slower sample counts as a drop.
        timeout: f64,
    },
    Gradient2 {
        initial: u32,
        min: u32,
        max: u32,
        smoothing: f64,
        queue_size: u32,
        long_window: u32,
        rtt_tolerance: f64,
    },
    Vegas {
        initial: u32,
        max: u32,
        smoothing: f64,
        /// None: 3 log10(limit) (Netflix's alpha function).
        alpha: Option<u32>,
        /// None: 6 log10(limit).
        beta: Option<u32>,
        probe_multiplier: u32,
    },
}

fn limit_key(p: &Params, key: &str, default: u32) -> Result<u32> {
    p.whole(key, i64::from(default), 1, MAX_LIMIT)
}

/// `min_limit ≤ initial_limit ≤ max_limit` (Netflix only warns; here it is a mistake).
fn ordered(p: &Params, min: u32, initial: u32, max: u32) -> Result<()> {
    if min > max {
        return Err(p.error(
            "min_limit",
            format!("must be at most max_limit ({max}), got {min}"),
        ));
    }
    if !(min..=max).contains(&initial) {
        return Err(p.error(
            "initial_limit",
            format!("must be from min_limit ({min}) to max_limit ({max}), got {initial}"),
        ));
    }
    Ok(())
}

fn smoothing(p: &Params, default: f64) -> Result<f64> {
    let s = p.get::<f64>("smoothing")?.unwrap_or(default);
    if !(s.is_finite() && s > 0.0 && s <= 1.0) {
        return Err(p.error(
            "smoothing",
            format!("must be above 0 and at most 1 (1: the new estimate whole), got {s}"),
        ));
    }
    Ok(s)
}

fn fixed(p: &Params) -> Result<ConcurrencyLimit> {
    let limit = p.get::<i64>("limit")?;
    let limit = p.required("limit", "a limit (requests in flight)", limit)?;
    Ok(ConcurrencyLimit::Fixed {
        limit: crate::params::whole(limit, &p.path("limit"), 1, MAX_LIMIT)?,
    })
}

fn aimd(p: &Params) -> Result<ConcurrencyLimit> {
    let (initial, min, max) = (
        limit_key(p, "initial_limit", AIMD_INITIAL)?,
        limit_key(p, "min_limit", AIMD_MIN)?,
        limit_key(p, "max_limit", AIMD_MAX)?,
    );
    ordered(p, min, initial, max)?;
    let backoff_ratio = p.get::<f64>("backoff_ratio")?.unwrap_or(AIMD_BACKOFF_RATIO);
    if !(0.5..1.0).contains(&backoff_ratio) {
        return Err(p.error(
            "backoff_ratio",
            format!("must be from 0.5 to below 1 (AIMDLimit's range), got {backoff_ratio}"),
        ));
    }
    let timeout = p.positive_duration("timeout")?.unwrap_or(AIMD_TIMEOUT);
    Ok(ConcurrencyLimit::Aimd {
        initial,
        min,
        max,
        backoff_ratio,
        timeout,
    })
}

fn gradient2(p: &Params) -> Result<ConcurrencyLimit> {
    let (initial, min, max) = (
        limit_key(p, "initial_limit", GRADIENT2_INITIAL)?,
        limit_key(p, "min_limit", GRADIENT2_MIN)?,
        limit_key(p, "max_limit", GRADIENT2_MAX)?,
    );
    ordered(p, min, initial, max)?;
    let rtt_tolerance = p
        .get::<f64>("rtt_tolerance")?
        .unwrap_or(GRADIENT2_RTT_TOLERANCE);
    if !(rtt_tolerance.is_finite() && rtt_tolerance >= 1.0) {
        return Err(p.error(
            "rtt_tolerance",
            format!("must be at least 1 (Gradient2Limit's check), got {rtt_tolerance}"),
        ));
    }
    Ok(ConcurrencyLimit::Gradient2 {
        initial,
        min,
        max,
        smoothing: smoothing(p, GRADIENT2_SMOOTHING)?,
        queue_size: p.whole("queue_size", i64::from(GRADIENT2_QUEUE_SIZE), 0, MAX_LIMIT)?,
        long_window: p.whole(
            "long_window",
            i64::from(GRADIENT2_LONG_WINDOW),
            1,
            MAX_LIMIT,
        )?,
        rtt_tolerance,
    })
}

fn vegas(p: &Params) -> Result<ConcurrencyLimit> {
    let initial = limit_key(p, "initial_limit", VEGAS_INITIAL)?;
    let max = limit_key(p, "max_limit", VEGAS_MAX)?;
    if initial > max {
        return Err(p.error(
            "initial_limit",
            format!("must be at most max_limit ({max}), got {initial}"),
        ));
    }
    let alpha = p
        .get::<i64>("alpha")?
        .map(|a| crate::params::whole::<u32>(a, &p.path("alpha"), 1, MAX_LIMIT))
        .transpose()?;
    let beta = p
        .get::<i64>("beta")?
        .map(|b| crate::params::whole::<u32>(b, &p.path("beta"), 1, MAX_LIMIT))
        .transpose()?;
    if let (Some(a), Some(b)) = (alpha, beta) {
        if a > b {
            return Err(p.error("beta", format!("must be at least alpha ({a}), got {b}")));
        }
    }
    Ok(ConcurrencyLimit::Vegas {
        initial,
        max,
        smoothing: smoothing(p, VEGAS_SMOOTHING)?,
        alpha,
        beta,
        probe_multiplier: p.whole(
            "probe_multiplier",
            i64::from(VEGAS_PROBE_MULTIPLIER),
            1,
            MAX_LIMIT,
        )?,
    })
}

impl ConcurrencyLimit {
    /// Builds the table at `path` (`router.concurrency_limit`): one line naming the key for a
    /// bad value.
    pub fn build(spec: &LimitSpec, path: &str) -> Result<ConcurrencyLimit> {
        let (keys, build) = REGISTRY.lookup(&spec.algorithm).ok_or_else(|| {
            Error::config(
                format!("{path}.algorithm"),
                format!(
                    "unknown algorithm {:?}; expected one of: {}",
                    spec.algorithm,
                    REGISTRY.names().join(", ")
                ),
            )
        })?;
        let params = Params::new(path, &spec.algorithm, &spec.params);
        params.allow(keys)?;
        build(&params)
    }

    /// The limit before any sample.
    pub fn initial(&self) -> u32 {
        match *self {
            ConcurrencyLimit::Fixed { limit } => limit,
            ConcurrencyLimit::Aimd { initial, .. }
            | ConcurrencyLimit::Gradient2 { initial, .. }
            | ConcurrencyLimit::Vegas { initial, .. } => initial,
        }
    }
}

/// Netflix's `Log10RootIntFunction`: ⌊log10(n)⌋, at least 1.
pub fn log10_root(n: u32) -> u32 {
    if n < 1000 {
        // Its lookup table: max(1, (int) Math.log10(i)).
        (f64::from(n).log10() as u32).max(1)
    } else {
        f64::from(n).log10() as u32
    }
}

/// `ExpAvgMeasurement(window, warmup)`: the plain mean of the first `warmup` samples, then an
/// exponential average of factor 2 / (window + 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpAvg {
    pub value: f64,
    sum: f64,
    count: u32,
    window: u32,
}

impl ExpAvg {
    pub fn new(window: u32) -> ExpAvg {
        ExpAvg {
            value: 0.0,
            sum: 0.0,
            count: 0,
            window,
        }
    }

    pub fn add(&mut self, sample: f64) -> f64 {
        if self.count < GRADIENT2_WARMUP {
            self.count += 1;
            self.sum += sample;
            self.value = self.sum / f64::from(self.count);
        } else {
            let factor = 2.0 / (f64::from(self.window) + 1.0);
            self.value = self.value * (1.0 - factor) + sample * factor;
        }
        self.value
    }
}

/// One limiter's algorithm state.
#[derive(Debug, Clone, PartialEq)]
pub enum LimitState {
    /// `fixed` and `aimd` keep only the limit.
    Plain {
        limit: u32,
    },
    Gradient2 {
        estimated: f64,
        long_rtt: ExpAvg,
    },
    Vegas {
        estimated: f64,
        /// Seconds; 0: none yet.
        rtt_noload: f64,
        probe_count: u64,
        probe_jitter: f64,
    },
}

impl LimitState {
    /// A limiter's state before any sample (Vegas draws its first probe's jitter).
    pub fn new<R: Rng>(spec: &ConcurrencyLimit, rng: &mut R) -> LimitState {
        match *spec {
            ConcurrencyLimit::Fixed { limit } => LimitState::Plain { limit },
            ConcurrencyLimit::Aimd { initial, .. } => LimitState::Plain { limit: initial },
            ConcurrencyLimit::Gradient2 {
                initial,
                long_window,
                ..
            } => LimitState::Gradient2 {
                estimated: f64::from(initial),
                long_rtt: ExpAvg::new(long_window),
            },
            ConcurrencyLimit::Vegas { initial, .. } => LimitState::Vegas {
                estimated: f64::from(initial),
                rtt_noload: 0.0,
                probe_count: 0,
                probe_jitter: rng.random_range(0.5..1.0),
            },
        }
    }

    /// The limit now: requests are admitted while fewer are in flight.
    #[inline]
    pub fn limit(&self) -> u32 {
        match *self {
            LimitState::Plain { limit } => limit,
            // `(int) estimatedLimit`.
            LimitState::Gradient2 { estimated, .. } | LimitState::Vegas { estimated, .. } => {
                estimated as u32
            }
        }
    }

    /// A request admitted with `inflight` in flight (itself included) ended after `rtt`
    /// seconds: a response (`dropped` false), or a timeout (true). Netflix's `_update`.
    pub fn sample<R: Rng>(
        &mut self,
        spec: &ConcurrencyLimit,
        rtt: f64,
        inflight: u32,
        dropped: bool,
        rng: &mut R,
    ) {
        match (self, *spec) {
            (LimitState::Plain { .. }, ConcurrencyLimit::Fixed { .. }) => {}
            (
                LimitState::Plain { limit },
                ConcurrencyLimit::Aimd {
                    min,
                    max,
                    backoff_ratio,
                    timeout,
                    ..
                },
            ) => {
                let mut current = *limit;
                if dropped || rtt > timeout {
                    current = (f64::from(current) * backoff_ratio) as u32;
                } else if u64::from(inflight) * 2 >= u64::from(current) {
                    current += 1;
                }
                *limit = current.clamp(min, max);
            }
            (
                LimitState::Gradient2 {
                    estimated,
                    long_rtt,
                },
                ConcurrencyLimit::Gradient2 {
                    min,
                    max,
                    smoothing,
                    queue_size,
                    rtt_tolerance,
                    ..
                },
            ) => {
                // A latency of 0 (a request answered at once) says nothing of queueing, and
                // would make the ratios below infinite.
                if rtt <= 0.0 {
                    return;
                }
                let queue = f64::from(queue_size);
                let short = rtt;
                let long = long_rtt.add(rtt);
                if long / short > 2.0 {
                    long_rtt.value *= 0.95;
                }
                if f64::from(inflight) < *estimated / 2.0 {
                    return;
                }
                let gradient = (rtt_tolerance * long / short).clamp(0.5, 1.0);
                let mut new = *estimated * gradient + queue;
                new = *estimated * (1.0 - smoothing) + new * smoothing;
                *estimated = new.clamp(f64::from(min), f64::from(max));
            }
            (
                LimitState::Vegas {
                    estimated,
                    rtt_noload,
                    probe_count,
                    probe_jitter,
                },
                ConcurrencyLimit::Vegas {
                    max,
                    smoothing,
                    alpha,
                    beta,
                    probe_multiplier,
                    ..
                },
            ) => {
                // VegasLimit refuses a latency of 0.
                if rtt <= 0.0 {
                    return;
                }
                *probe_count += 1;
                if *probe_jitter * f64::from(probe_multiplier) * *estimated <= *probe_count as f64 {
                    *probe_jitter = rng.random_range(0.5..1.0);
                    *probe_count = 0;
                    *rtt_noload = rtt;
                    return;
                }
                if *rtt_noload == 0.0 || rtt < *rtt_noload {
                    *rtt_noload = rtt;
                    return;
                }
                let whole = *estimated as u32;
                let log = f64::from(log10_root(whole));
                let queue = (*estimated * (1.0 - *rtt_noload / rtt)).ceil();
                let new = if dropped {
                    *estimated - log
                } else if f64::from(inflight) * 2.0 < *estimated {
                    return;
                } else {
                    let alpha = f64::from(alpha.unwrap_or(3 * log10_root(whole)));
                    let beta = f64::from(beta.unwrap_or(6 * log10_root(whole)));
                    if queue <= log {
                        *estimated + beta
                    } else if queue < alpha {
                        *estimated + log
                    } else if queue > beta {
                        *estimated - log
                    } else {
                        return;
                    }
                };
                let new = new.clamp(1.0, f64::from(max));
                *estimated = (1.0 - smoothing) * *estimated + smoothing * new;
            }
            (state, spec) => unreachable!("a limiter's state {state:?} for {spec:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Stream};

    fn build(text: &str) -> Result<ConcurrencyLimit> {
        let spec: LimitSpec = serde_json::from_str(text).expect("a table");
        ConcurrencyLimit::build(&spec, "app.concurrency_limit")
    }

    fn rng() -> crate::rng::SimRng {
        stream(1, 0, Stream::Limits)
    }

    #[test]
    fn defaults_are_netflix_builders() {
        assert_eq!(
            build(r#"{"algorithm": "aimd"}"#).unwrap(),
            ConcurrencyLimit::Aimd {
                initial: 20,
                min: 20,
                max: 200,
                backoff_ratio: 0.9,
                timeout: 5.0
            }
        );
        assert_eq!(
            build(r#"{"algorithm": "gradient2"}"#).unwrap(),
            ConcurrencyLimit::Gradient2 {
                initial: 20,
                min: 20,
                max: 200,
                smoothing: 0.2,
                queue_size: 4,
                long_window: 600,
                rtt_tolerance: 1.5
            }
        );
        assert_eq!(
            build(r#"{"algorithm": "vegas"}"#).unwrap(),
            ConcurrencyLimit::Vegas {
                initial: 20,
                max: 1000,
                smoothing: 1.0,
                alpha: None,
                beta: None,
                probe_multiplier: 30
            }
        );
    }

    #[test]
    fn bad_input_names_the_key() {
        for (text, key, words) in [
            (
                r#"{"algorithm": "bbr"}"#,
                "app.concurrency_limit.algorithm",
                "unknown algorithm",
            ),
            (
                r#"{"algorithm": "fixed"}"#,
                "app.concurrency_limit.limit",
                "missing",
            ),
            (
                r#"{"algorithm": "fixed", "limit": 0}"#,
                "app.concurrency_limit.limit",
                ">= 1",
            ),
            (
                r#"{"algorithm": "aimd", "min_limit": 0}"#,
                "app.concurrency_limit.min_limit",
                ">= 1",
            ),
            (
                r#"{"algorithm": "aimd", "backoff_ratio": 1.0}"#,
                "app.concurrency_limit.backoff_ratio",
                "0.5",
            ),
            (
                r#"{"algorithm": "aimd", "backoff_ratio": 0.4}"#,
                "app.concurrency_limit.backoff_ratio",
                "0.5",
            ),
            (
                r#"{"algorithm": "aimd", "initial_limit": 5}"#,
                "app.concurrency_limit.initial_limit",
                "min_limit",
            ),
            (
                r#"{"algorithm": "gradient2", "smoothing": 1.5}"#,
                "app.concurrency_limit.smoothing",
                "at most 1",
            ),
            (
                r#"{"algorithm": "gradient2", "rtt_tolerance": 0.9}"#,
                "app.concurrency_limit.rtt_tolerance",
                "at least 1",
            ),
            (
                r#"{"algorithm": "vegas", "alpha": 5, "beta": 3}"#,
                "app.concurrency_limit.beta",
                "alpha",
            ),
            (
                r#"{"algorithm": "vegas", "min_limit": 3}"#,
                "app.concurrency_limit.min_limit",
                "unknown key",
            ),
        ] {
            let e = build(text).expect_err(text).to_string();
            assert!(e.contains(key) && e.contains(words), "{text}: {e}");
            assert!(!e.contains('\n'), "{text}: one line: {e}");
        }
    }

    #[test]
    fn log10_root_is_netflix_table() {
        for (n, want) in [
            (0, 1),
            (1, 1),
            (9, 1),
            (10, 1),
            (99, 1),
            (100, 2),
            (999, 2),
            (1000, 3),
            (20_000, 4),
        ] {
            assert_eq!(log10_root(n), want, "{n}");
        }
    }

    /// AIMDLimit._update, step by step: +1 while half the limit is in flight, × 0.9
    /// (truncated) on a drop or a sample over the timeout, within [min, max].
    #[test]
    fn aimd_steps() {
        let spec = build(
            r#"{"algorithm": "aimd", "initial_limit": 20, "min_limit": 10, "max_limit": 22}"#,
        )
        .unwrap();
        let mut s = LimitState::new(&spec, &mut rng());
        let mut r = rng();
        assert_eq!(s.limit(), 20);
        s.sample(&spec, 0.1, 10, false, &mut r); // 10 × 2 ≥ 20: + 1
        assert_eq!(s.limit(), 21);
        s.sample(&spec, 0.1, 10, false, &mut r); // 20 < 21: app-limited, unchanged
        assert_eq!(s.limit(), 21);
        s.sample(&spec, 0.1, 11, false, &mut r);
        assert_eq!(s.limit(), 22);
        s.sample(&spec, 0.1, 22, false, &mut r); // at max_limit
        assert_eq!(s.limit(), 22);
        s.sample(&spec, 0.1, 22, true, &mut r); // (int)(22 × 0.9) = 19
        assert_eq!(s.limit(), 19);
        s.sample(&spec, 5.001, 22, false, &mut r); // over the 5 s timeout: (int) 17.1
        assert_eq!(s.limit(), 17);
        s.sample(&spec, 5.0, 22, false, &mut r); // at the timeout: not a drop
        assert_eq!(s.limit(), 18);
        for _ in 0..10 {
            s.sample(&spec, 0.1, 1, true, &mut r);
        }
        assert_eq!(s.limit(), 10, "min_limit");
    }

    /// Gradient2Limit._update by hand: queue 4, smoothing 0.2, tolerance 1.5; the long
    /// average is the plain mean of the first 10 samples.
    #[test]
    fn gradient2_steps() {
        let spec = build(
            r#"{"algorithm": "gradient2", "initial_limit": 50, "min_limit": 1, "max_limit": 200}"#,
        )
        .unwrap();
        let mut s = LimitState::new(&spec, &mut rng());
        let mut r = rng();
        let estimated = |s: &LimitState| match s {
            LimitState::Gradient2 { estimated, .. } => *estimated,
            _ => unreachable!(),
        };
        // 1: long = 0.1, short = 0.1: gradient min(1, 1.5) = 1; new = 50 + 4 = 54;
        // smoothed 50 × 0.8 + 54 × 0.2 = 50.8.
        s.sample(&spec, 0.1, 30, false, &mut r);
        assert!((estimated(&s) - 50.8).abs() < 1e-12);
        assert_eq!(s.limit(), 50);
        // 2: long = (0.1 + 0.4) / 2 = 0.25, short 0.4: gradient 1.5 × 0.625 = 0.9375;
        // new = 50.8 × 0.9375 + 4 = 51.625; smoothed 40.64 + 10.325 = 50.965.
        s.sample(&spec, 0.4, 30, false, &mut r);
        assert!((estimated(&s) - 50.965).abs() < 1e-12, "{}", estimated(&s));
        // 3: app-limited (20 < 50.965 / 2): the long average moves, the limit does not.
        s.sample(&spec, 1.0, 20, false, &mut r);
        assert!((estimated(&s) - 50.965).abs() < 1e-12);
        // 4: long = (0.1 + 0.4 + 1.0 + 4.0) / 4 = 1.375, short 4: gradient
        // max(0.5, 1.5 × 0.34375) = 0.515625; new = 50.965 × 0.515625 + 4 = 30.2788...;
        // smoothed 0.8 × 50.965 + 0.2 × new.
        s.sample(&spec, 4.0, 30, false, &mut r);
        let new = 50.965 * 0.515625 + 4.0;
        assert!((estimated(&s) - (0.8 * 50.965 + 0.2 * new)).abs() < 1e-9);
        // 5: a fast sample: long = 5.51 / 5 = 1.102 > 2 × 0.01: the long average decays by
        // 5% (after the gradient's long is read: gradient 1).
        let before = estimated(&s);
        s.sample(&spec, 0.01, 30, false, &mut r);
        match &s {
            LimitState::Gradient2 { long_rtt, .. } => {
                assert!((long_rtt.value - 1.102 * 0.95).abs() < 1e-12)
            }
            _ => unreachable!(),
        }
        assert!((estimated(&s) - (0.8 * before + 0.2 * (before + 4.0))).abs() < 1e-9);
    }

    /// After its 10 samples' warm-up the long average moves by 2 / (long_window + 1).
    #[test]
    fn gradient2_long_average_is_exponential_after_warmup() {
        let mut m = ExpAvg::new(600);
        for _ in 0..10 {
            m.add(1.0);
        }
        assert_eq!(m.value, 1.0);
        let f = 2.0 / 601.0;
        assert!((m.add(2.0) - (1.0 - f + 2.0 * f)).abs() < 1e-15);
    }

    /// VegasLimit._update by hand (smoothing 1, α = 3, β = 6, log10 = 1 below 100).
    #[test]
    fn vegas_steps() {
        let spec = build(r#"{"algorithm": "vegas", "initial_limit": 20}"#).unwrap();
        let mut s = LimitState::new(&spec, &mut rng());
        let mut r = rng();
        let get = |s: &LimitState| match s {
            LimitState::Vegas {
                estimated,
                rtt_noload,
                ..
            } => (*estimated, *rtt_noload),
            _ => unreachable!(),
        };
        // The first sample sets rtt_noload and nothing else.
        s.sample(&spec, 0.1, 15, false, &mut r);
        assert_eq!(get(&s), (20.0, 0.1));
        // queue = ⌈20 × (1 − 0.1/0.1)⌉ = 0 ≤ threshold 1: + β (6).
        s.sample(&spec, 0.1, 15, false, &mut r);
        assert_eq!(get(&s), (26.0, 0.1));
        // queue = ⌈26 × (1 − 0.1/0.105)⌉ = ⌈1.238⌉ = 2: below α (3): + log10 (1).
        s.sample(&spec, 0.105, 15, false, &mut r);
        assert_eq!(get(&s).0, 27.0);
        // queue = ⌈27 × 0.5⌉ = 14 > β (6): − 1.
        s.sample(&spec, 0.2, 15, false, &mut r);
        assert_eq!(get(&s).0, 26.0);
        // queue = ⌈26 × (1 − 0.1/0.125)⌉ = ⌈5.2⌉ = 6: from α to β, unchanged.
        s.sample(&spec, 0.125, 15, false, &mut r);
        assert_eq!(get(&s).0, 26.0);
        // App-limited (12 × 2 < 26): unchanged however slow; a drop: − 1 all the same.
        s.sample(&spec, 1.0, 12, false, &mut r);
        assert_eq!(get(&s).0, 26.0);
        s.sample(&spec, 1.0, 12, true, &mut r);
        assert_eq!(get(&s).0, 25.0);
        // A faster sample is the new rtt_noload.
        s.sample(&spec, 0.05, 15, false, &mut r);
        assert_eq!(get(&s), (25.0, 0.05));
    }

    /// Smoothing: the new estimate weighs `smoothing`; a probe every jitter × 30 × limit
    /// samples takes the sample as rtt_noload, whatever it is.
    #[test]
    fn vegas_smoothing_and_probes() {
        let spec = build(r#"{"algorithm": "vegas", "initial_limit": 10, "smoothing": 0.5, "alpha": 2, "beta": 4}"#).unwrap();
        let mut s = LimitState::new(&spec, &mut rng());
        let mut r = rng();
        s.sample(&spec, 0.1, 10, false, &mut r);
        // queue 0 ≤ 1: new = 10 + β (4) = 14; smoothed 0.5 × 10 + 0.5 × 14 = 12.
        s.sample(&spec, 0.1, 10, false, &mut r);
        match &s {
            LimitState::Vegas { estimated, .. } => assert_eq!(*estimated, 12.0),
            _ => unreachable!(),
        }
        let jitter = match &s {
            LimitState::Vegas { probe_jitter, .. } => *probe_jitter,
            _ => unreachable!(),
        };
        assert!((0.5..1.0).contains(&jitter));
        // Slow samples (queue > β, −1 each) until the probe, which takes 0.3 as rtt_noload.
        let mut n = 2u64;
        loop {
            let (est, count) = match &s {
                LimitState::Vegas {
                    estimated,
                    probe_count,
                    ..
                } => (*estimated, *probe_count),
                _ => unreachable!(),
            };
            let probe = jitter * 30.0 * est <= (count + 1) as f64;
            s.sample(&spec, 0.3, 10, false, &mut r);
            n += 1;
            if probe {
                match &s {
                    LimitState::Vegas {
                        rtt_noload,
                        probe_count,
                        ..
                    } => {
                        assert_eq!((*rtt_noload, *probe_count), (0.3, 0));
                    }
                    _ => unreachable!(),
                }
                break;
            }
            assert!(n < 10_000);
        }
    }
}
