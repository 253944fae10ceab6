//! Client retries (`[arrivals.retry]`): a client whose request failed sends it again, after a
//! backoff, up to `attempts` tries in all, while its retry budget allows. The first try
//! included: `attempts = 1` is a client that never retries.
//!
//! What a retry is in the engine: the same request (its class, its drawn work and key) sent
//! again as a new attempt, through the router like any arrival. The attempt that failed is
//! not cancelled: a dyno that holds it works on (as the router's H12 leaves it), and what it
//! does then is work done for nobody (`wasted`).
//!
//! Sources of the laws and defaults (docs/feedback.md has the table):
//! - backoff and jitter: Marc Brooker, "Exponential Backoff And Jitter", AWS Architecture Blog
//!   (2015): exponential `min(cap, base·multiplier^k)`, "full" jitter `U(0, that)`, "equal"
//!   `that/2 + U(0, that/2)`, "decorrelated" `min(cap, U(base, 3·previous))`;
//! - the defaults (3 attempts, exponential from 100 ms, doubling, capped at 20 s, full jitter)
//!   are the AWS SDKs' "standard" retry mode;
//! - budgets: [`budget`].

pub mod budget;
pub mod clients;
pub mod router;

use crate::error::{Error, Result};
use crate::result::ErrorKind;
use crate::units::Duration;
use budget::{BudgetSpec, RetryBudget};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// `[arrivals.retry]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    /// Tries in all, the first included (1: no retry). 3 when left out.
    #[serde(default)]
    pub attempts: Option<i64>,
    /// Which outcomes are retried: "timeout" (the client's own `arrivals.timeout`), "5xx"
    /// (any error the router or the app answers), "refused" (answered at once, before any
    /// dyno worked on it). A list, or one name. `["timeout", "5xx"]` when left out.
    #[serde(default)]
    pub on: Option<serde_json::Value>,
    /// "exponential" (the default) or "constant".
    #[serde(default)]
    pub backoff: Option<String>,
    /// The first retry's delay before jitter (the constant one's every delay).
    #[serde(default)]
    pub base: Option<Duration>,
    /// No delay exceeds it.
    #[serde(default)]
    pub cap: Option<Duration>,
    /// Each retry's delay over the one before, for an exponential backoff.
    #[serde(default)]
    pub multiplier: Option<f64>,
    /// "full" (the default), "equal", "decorrelated" or "none".
    #[serde(default)]
    pub jitter: Option<String>,
    /// A budget that every client's retries draw on together; None: none.
    #[serde(default)]
    pub budget: Option<BudgetSpec>,
}

/// `arrivals.retry.attempts` when the table is given without it: the AWS SDKs' standard mode
/// (and the Google SRE book's "at most 3 attempts per request").
pub const DEFAULT_ATTEMPTS: u32 = 3;
/// The most tries a client may make (a typo of 1000 would be a load generator of its own).
pub const MAX_ATTEMPTS: i64 = 100;
/// Backoff defaults: the AWS SDKs' standard retry mode.
pub const DEFAULT_BASE: f64 = 0.1;
pub const DEFAULT_CAP: f64 = 20.0;
pub const DEFAULT_MULTIPLIER: f64 = 2.0;

/// Which failed outcomes a client retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetryOn {
    /// The client's own timeout (`arrivals.timeout`) came first.
    pub timeout: bool,
    /// Any error answered by the router or the app.
    pub errors: bool,
    /// An error answered at once, before any dyno worked on the request (a full router, no
    /// dyno up, every dyno refusing the connection, a shed).
    pub refused: bool,
}

/// How a failed attempt ended, as a client tells outcomes apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Its own timeout.
    Timeout,
    /// An error answered after a dyno had it (or might have: H12, an app's error).
    Error,
    /// An error answered before any dyno worked on it.
    Refused,
}

impl Failure {
    /// How a client sees an attempt answered with `kind`.
    pub fn of(kind: ErrorKind) -> Failure {
        match kind {
            ErrorKind::ClientTimeout => Failure::Timeout,
            // The clients' own breaker failed it before it was sent: a refusal.
            ErrorKind::H11
            | ErrorKind::H13
            | ErrorKind::Shed
            | ErrorKind::NoDyno
            | ErrorKind::BreakerOpen
            // A limit answers before any work is done on it.
            | ErrorKind::LimitRejected => Failure::Refused,
            ErrorKind::CallFailed
            | ErrorKind::H12
            | ErrorKind::QueueTimeout
            | ErrorKind::AppTimeout
            | ErrorKind::R15
            | ErrorKind::Shutdown
            | ErrorKind::Outage
            | ErrorKind::Crashed
            | ErrorKind::WaitTimeout
            | ErrorKind::ServiceTimeout
            | ErrorKind::ResourceTimeout => Failure::Error,
        }
    }
}

impl Failure {
    /// How a client sees a whole HTTP response with `status`: None for a success (below
    /// 500), an error answered otherwise.
    pub fn of_status(status: u16) -> Option<Failure> {
        (status >= 500).then_some(Failure::Error)
    }
}

impl RetryOn {
    /// Whether an attempt that failed as `failure` is retried.
    #[inline]
    pub fn retries(&self, failure: Failure) -> bool {
        match failure {
            Failure::Timeout => self.timeout,
            // "5xx" takes in every error answered, refusals too (they are 503s).
            Failure::Error => self.errors,
            Failure::Refused => self.errors || self.refused,
        }
    }

    fn parse(value: Option<&serde_json::Value>) -> Result<RetryOn> {
        const PATH: &str = "arrivals.retry.on";
        let Some(value) = value else {
            // ["timeout", "5xx"]: every failure ("5xx" takes in the refusals).
            return Ok(RetryOn {
                timeout: true,
                errors: true,
                refused: false,
            });
        };
        let on = outcomes(value, PATH)?;
        if on == RetryOn::default() {
            return Err(Error::config(
                PATH,
                "an empty list retries nothing; give attempts = 1 for no retries",
            ));
        }
        Ok(on)
    }
}

/// A list of outcomes as written at `path` (`"timeout"`, `"5xx"`, `"refused"`; one name alone
/// stands for a list of it), for the clients' `on` and the routers' `retry_on` alike.
pub(crate) fn outcomes(value: &serde_json::Value, path: &str) -> Result<RetryOn> {
    let names: Vec<&serde_json::Value> = match value {
        serde_json::Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    let mut on = RetryOn::default();
    for (i, name) in names.iter().enumerate() {
        match name.as_str() {
            Some("timeout") => on.timeout = true,
            Some("5xx") => on.errors = true,
            Some("refused") => on.refused = true,
            _ => {
                let at = if value.is_array() {
                    format!("{path}[{i}]")
                } else {
                    path.to_string()
                };
                return Err(Error::config(
                    at,
                    format!("unknown outcome {name}; expected \"timeout\", \"5xx\" or \"refused\""),
                ));
            }
        }
    }
    Ok(on)
}

/// How a retry's delay grows with the tries before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Growth {
    Constant,
    Exponential,
}

/// How a delay is spread around its nominal value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    None,
    Full,
    Equal,
    Decorrelated,
}

/// The delay before each retry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub growth: Growth,
    pub base: f64,
    pub cap: f64,
    pub multiplier: f64,
    pub jitter: Jitter,
}

impl Backoff {
    /// The nominal delay before retry `k` (1 for the first retry): `base` for a constant
    /// backoff, `min(cap, base·multiplier^(k−1))` for an exponential one.
    pub fn nominal(&self, k: u32) -> f64 {
        match self.growth {
            Growth::Constant => self.base.min(self.cap),
            Growth::Exponential => {
                let grown = self.base * self.multiplier.powi(k.saturating_sub(1) as i32);
                grown.min(self.cap)
            }
        }
    }

    /// The delay before retry `k` (1 for the first), given the delay drawn before the last
    /// retry (`previous`, 0 before the first): what decorrelated jitter grows from.
    pub fn delay<R: Rng + ?Sized>(&self, k: u32, previous: f64, rng: &mut R) -> f64 {
        let d = self.nominal(k);
        match self.jitter {
            Jitter::None => d,
            Jitter::Full => d * rng.random::<f64>(),
            Jitter::Equal => d / 2.0 + d / 2.0 * rng.random::<f64>(),
            Jitter::Decorrelated => {
                // Brooker's `sleep = min(cap, random_between(base, sleep * 3))`, from
                // `sleep = base`.
                let from = self.base;
                let to = (if previous > 0.0 { previous } else { self.base }) * 3.0;
                (from + (to - from) * rng.random::<f64>()).min(self.cap)
            }
        }
    }
}

/// `[arrivals.retry]`, built.
#[derive(Debug, Clone)]
pub struct ClientRetry {
    /// Tries in all, the first included (at least 2: a scenario of 1 builds no retries).
    pub attempts: u32,
    pub on: RetryOn,
    pub backoff: Backoff,
    /// The budget's kind and settings; each replication builds its own state from it.
    pub budget: Option<RetryBudget>,
}

impl ClientRetry {
    /// Builds `[arrivals.retry]`; None when it retries nothing (`attempts = 1`).
    pub fn build(spec: &RetrySpec) -> Result<Option<ClientRetry>> {
        const P: &str = "arrivals.retry";
        let attempts = match spec.attempts {
            None => DEFAULT_ATTEMPTS,
            Some(n) if (1..=MAX_ATTEMPTS).contains(&n) => n as u32,
            Some(n) => {
                return Err(Error::config(
                    format!("{P}.attempts"),
                    format!(
                        "must be a whole number from 1 (no retries) to {MAX_ATTEMPTS}: the tries \
                         in all, the first included; got {n}"
                    ),
                ))
            }
        };
        let on = RetryOn::parse(spec.on.as_ref())?;
        let growth = match spec.backoff.as_deref() {
            None | Some("exponential") => Growth::Exponential,
            Some("constant") => Growth::Constant,
            Some(other) => {
                return Err(Error::config(
                    format!("{P}.backoff"),
                    format!("unknown backoff {other:?}; expected \"exponential\" or \"constant\""),
                ))
            }
        };
        let jitter = match spec.jitter.as_deref() {
            None | Some("full") => Jitter::Full,
            Some("none") => Jitter::None,
            Some("equal") => Jitter::Equal,
            Some("decorrelated") => Jitter::Decorrelated,
            Some(other) => {
                return Err(Error::config(
                    format!("{P}.jitter"),
                    format!(
                        "unknown jitter {other:?}; expected \"full\", \"equal\", \
                         \"decorrelated\" or \"none\""
                    ),
                ))
            }
        };
        let duration = |d: Option<Duration>, key: &str, default: f64| -> Result<f64> {
            match d {
                None => Ok(default),
                Some(Duration(s)) if s.is_finite() && s >= 0.0 => Ok(s),
                Some(Duration(s)) => Err(Error::config(
                    format!("{P}.{key}"),
                    format!("must be a duration of 0 or more, got {s} s"),
                )),
            }
        };
        let base = duration(spec.base, "base", DEFAULT_BASE)?;
        let cap = duration(spec.cap, "cap", DEFAULT_CAP.max(base))?;
        if cap < base {
            return Err(Error::config(
                format!("{P}.cap"),
                format!("must be at least base ({base} s), got {cap} s"),
            ));
        }
        let multiplier = match spec.multiplier {
            None => DEFAULT_MULTIPLIER,
            Some(m) if m.is_finite() && (1.0..=100.0).contains(&m) => m,
            Some(m) => {
                return Err(Error::config(
                    format!("{P}.multiplier"),
                    format!("must be a number from 1 to 100, got {m}"),
                ))
            }
        };
        if growth == Growth::Constant && spec.multiplier.is_some() {
            return Err(Error::config(
                format!("{P}.multiplier"),
                "a constant backoff has no multiplier; give backoff = \"exponential\"",
            ));
        }
        if jitter == Jitter::Decorrelated && base == 0.0 {
            return Err(Error::config(
                format!("{P}.base"),
                "decorrelated jitter grows from base (U(base, 3·previous)): give a base above 0",
            ));
        }
        let budget = spec
            .budget
            .as_ref()
            .map(|b| RetryBudget::build(b, &format!("{P}.budget")))
            .transpose()?;
        if attempts == 1 {
            return Ok(None);
        }
        Ok(Some(ClientRetry {
            attempts,
            on,
            backoff: Backoff {
                growth,
                base,
                cap,
                multiplier,
                jitter,
            },
            budget,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn spec(json: serde_json::Value) -> RetrySpec {
        serde_json::from_value(json).expect("a retry table")
    }

    fn build(json: serde_json::Value) -> Result<Option<ClientRetry>> {
        ClientRetry::build(&spec(json))
    }

    fn error(json: serde_json::Value) -> String {
        build(json).expect_err("refused").to_string()
    }

    #[test]
    fn defaults_are_the_standard_mode() {
        let r = build(serde_json::json!({})).unwrap().unwrap();
        assert_eq!(r.attempts, 3);
        assert!(r.on.timeout && r.on.errors);
        assert_eq!(r.backoff.growth, Growth::Exponential);
        assert_eq!(r.backoff.jitter, Jitter::Full);
        assert_eq!((r.backoff.base, r.backoff.cap), (0.1, 20.0));
        assert!(r.budget.is_none());
    }

    #[test]
    fn one_attempt_builds_no_retries() {
        assert!(build(serde_json::json!({"attempts": 1})).unwrap().is_none());
    }

    #[test]
    fn bad_values_name_their_key() {
        assert!(error(serde_json::json!({"attempts": 0})).starts_with("arrivals.retry.attempts:"));
        assert!(error(serde_json::json!({"jitter": "fuzzy"})).starts_with("arrivals.retry.jitter:"));
        assert!(error(serde_json::json!({"on": ["timeout", "4xx"]}))
            .starts_with("arrivals.retry.on[1]:"));
        assert!(error(serde_json::json!({"on": []})).starts_with("arrivals.retry.on:"));
        assert!(
            error(serde_json::json!({"backoff": "linear"})).starts_with("arrivals.retry.backoff:")
        );
        assert!(
            error(serde_json::json!({"base": 2.0, "cap": 1.0})).starts_with("arrivals.retry.cap:")
        );
        assert!(
            error(serde_json::json!({"multiplier": 0.5})).starts_with("arrivals.retry.multiplier:")
        );
    }

    #[test]
    fn on_takes_a_name_or_a_list() {
        let r = build(serde_json::json!({"on": "refused"}))
            .unwrap()
            .unwrap();
        assert_eq!(
            r.on,
            RetryOn {
                timeout: false,
                errors: false,
                refused: true
            }
        );
        assert!(r.on.retries(Failure::of(ErrorKind::H11)));
        assert!(!r.on.retries(Failure::of(ErrorKind::H12)));
        assert!(!r.on.retries(Failure::of(ErrorKind::ClientTimeout)));
        let r = build(serde_json::json!({"on": ["5xx"]})).unwrap().unwrap();
        assert!(r.on.retries(Failure::of(ErrorKind::H12)));
        assert!(r.on.retries(Failure::of(ErrorKind::NoDyno)));
        assert!(!r.on.retries(Failure::of(ErrorKind::ClientTimeout)));
    }

    #[test]
    fn nominal_delays_grow_and_stop_at_the_cap() {
        let b = Backoff {
            growth: Growth::Exponential,
            base: 0.1,
            cap: 1.0,
            multiplier: 2.0,
            jitter: Jitter::None,
        };
        let delays: Vec<f64> = (1..=6).map(|k| b.nominal(k)).collect();
        assert_eq!(delays, vec![0.1, 0.2, 0.4, 0.8, 1.0, 1.0]);
        let c = Backoff {
            growth: Growth::Constant,
            ..b
        };
        assert!((1..=6).all(|k| c.nominal(k) == 0.1));
    }

    /// Kolmogorov–Smirnov distance between `xs` and the CDF `f`.
    fn ks(xs: &mut [f64], f: impl Fn(f64) -> f64) -> f64 {
        xs.sort_by(f64::total_cmp);
        let n = xs.len() as f64;
        xs.iter()
            .enumerate()
            .map(|(i, &x)| {
                let c = f(x);
                (c - i as f64 / n).abs().max((c - (i + 1) as f64 / n).abs())
            })
            .fold(0.0, f64::max)
    }

    /// The KS distance beyond which a sample of n is refused at the 0.1% level (the
    /// asymptotic critical value 1.949/√n).
    fn ks_critical(n: usize) -> f64 {
        1.949 / (n as f64).sqrt()
    }

    #[test]
    fn drawn_delays_follow_their_jitter_laws() {
        let n = 20_000;
        let mut rng = crate::rng::SimRng::seed_from_u64(7);
        let b = Backoff {
            growth: Growth::Exponential,
            base: 0.1,
            cap: 20.0,
            multiplier: 2.0,
            jitter: Jitter::Full,
        };
        // Full jitter on the third retry: U(0, 0.4).
        let mut xs: Vec<f64> = (0..n).map(|_| b.delay(3, 0.0, &mut rng)).collect();
        assert!(ks(&mut xs, |x| (x / 0.4).clamp(0.0, 1.0)) < ks_critical(n));
        // Equal jitter: U(0.2, 0.4).
        let e = Backoff {
            jitter: Jitter::Equal,
            ..b
        };
        let mut xs: Vec<f64> = (0..n).map(|_| e.delay(3, 0.0, &mut rng)).collect();
        assert!(ks(&mut xs, |x| ((x - 0.2) / 0.2).clamp(0.0, 1.0)) < ks_critical(n));
        // Decorrelated after a delay of 0.5: U(0.1, 1.5).
        let d = Backoff {
            jitter: Jitter::Decorrelated,
            ..b
        };
        let mut xs: Vec<f64> = (0..n).map(|_| d.delay(4, 0.5, &mut rng)).collect();
        assert!(ks(&mut xs, |x| ((x - 0.1) / 1.4).clamp(0.0, 1.0)) < ks_critical(n));
        // Decorrelated, capped: min(0.3, U(0.1, 1.5)) has an atom of 1.2/1.4 at the cap.
        let dc = Backoff { cap: 0.3, ..d };
        let at_cap = (0..n).filter(|_| dc.delay(4, 0.5, &mut rng) == 0.3).count() as f64 / n as f64;
        let p = 1.2 / 1.4;
        assert!((at_cap - p).abs() < 4.0 * (p * (1.0 - p) / n as f64).sqrt());
        // The wrong law is refused, so the test can fail: U(0, 0.4) is not U(0, 0.5).
        let mut xs: Vec<f64> = (0..n).map(|_| b.delay(3, 0.0, &mut rng)).collect();
        assert!(ks(&mut xs, |x| (x / 0.5).clamp(0.0, 1.0)) > ks_critical(n));
    }

    #[test]
    fn no_jitter_draws_nothing() {
        let b = Backoff {
            growth: Growth::Constant,
            base: 0.25,
            cap: 20.0,
            multiplier: 2.0,
            jitter: Jitter::None,
        };
        let mut rng = crate::rng::SimRng::seed_from_u64(1);
        let before = rng.clone();
        assert_eq!(b.delay(2, 0.0, &mut rng), 0.25);
        assert_eq!(rng, before);
    }
}
