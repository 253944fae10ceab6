//! The clients' circuit breaker (`[arrivals.breaker]`): one breaker shared by every client of
//! the workload (one client library in a front end), after resilience4j's CircuitBreaker. It
//! records each try's outcome (a failure: any error the client gets, its own timeout included;
//! a slow call: one that took longer than `slow_call_duration`) in a sliding window of the last
//! `window` calls (or seconds); once `min_calls` are in it and the failure rate (or the slow
//! call rate) reaches its threshold, it opens: for `open_for` every try is failed at once
//! (`breaker_open`), never sent. Then it is half-open: it lets `half_open_calls` tries through
//! and fails the others at once; when those have answered it closes (a fresh window) or, if
//! they fail as often as the threshold, opens again. Its state and its moves are [`state`]'s,
//! which the simulation and the testbed's load generator both use.
//!
//! Sources (docs/feedback.md has the table): resilience4j's `CircuitBreakerConfig` (its
//! `DEFAULT_*` constants): failure rate threshold 50%, slow call rate threshold 100%, slow call
//! duration 60 s, wait in the open state 60 s, 10 calls permitted when half-open, a
//! count-based window of 100 calls, a minimum of 100 calls; a count-based window's minimum is
//! at most its size (resilience4j's `CircuitBreakerMetrics`).

pub mod state;

pub use state::{Breaker, Moved};

use crate::error::{Error, Result};
use crate::units::Duration;
use serde::{Deserialize, Serialize};

/// resilience4j's defaults (`CircuitBreakerConfig.DEFAULT_*`).
pub const DEFAULT_FAILURE_RATE: f64 = 50.0;
pub const DEFAULT_SLOW_CALL_RATE: f64 = 100.0;
pub const DEFAULT_SLOW_CALL_DURATION: f64 = 60.0;
pub const DEFAULT_OPEN_FOR: f64 = 60.0;
pub const DEFAULT_HALF_OPEN_CALLS: u32 = 10;
pub const DEFAULT_WINDOW: u32 = 100;
pub const DEFAULT_MIN_CALLS: u32 = 100;
/// The largest window and call counts taken (a window is kept call by call, or second by
/// second).
pub const MAX_COUNT: i64 = 1_000_000;

/// `[arrivals.breaker]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerSpec {
    /// Percentage of failed calls in the window at which it opens (resilience4j's
    /// failureRateThreshold).
    #[serde(default)]
    pub failure_rate: Option<f64>,
    /// Percentage of slow calls at which it opens (slowCallRateThreshold).
    #[serde(default)]
    pub slow_call_rate: Option<f64>,
    /// A call longer than this is slow (slowCallDurationThreshold).
    #[serde(default)]
    pub slow_call_duration: Option<Duration>,
    /// "count_based" (the last `window` calls) or "time_based" (the calls of the last
    /// `window` seconds): slidingWindowType.
    #[serde(default)]
    pub window_type: Option<String>,
    /// The window's size: calls, or seconds (slidingWindowSize).
    #[serde(default)]
    pub window: Option<i64>,
    /// Calls in the window before a rate is judged (minimumNumberOfCalls).
    #[serde(default)]
    pub min_calls: Option<i64>,
    /// How long it stays open (waitDurationInOpenState).
    #[serde(default)]
    pub open_for: Option<Duration>,
    /// Calls let through when half-open (permittedNumberOfCallsInHalfOpenState).
    #[serde(default)]
    pub half_open_calls: Option<i64>,
}

/// How the window holds the outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowType {
    /// The last `window` calls.
    Count,
    /// The calls of the last `window` seconds, in buckets of one second.
    Time,
}

/// `[arrivals.breaker]`, built.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientBreaker {
    /// Thresholds, as percentages (above 0, at most 100).
    pub failure_rate: f64,
    pub slow_call_rate: f64,
    /// Seconds.
    pub slow_call_duration: f64,
    pub window_type: WindowType,
    /// Calls, or seconds.
    pub window: u32,
    /// At most `window` for a count-based window.
    pub min_calls: u32,
    /// Seconds.
    pub open_for: f64,
    pub half_open_calls: u32,
}

impl ClientBreaker {
    /// Builds `[arrivals.breaker]`: one line naming the key for a bad value.
    pub fn build(spec: &BreakerSpec) -> Result<ClientBreaker> {
        const P: &str = "arrivals.breaker";
        let percent = |v: Option<f64>, key: &str, default: f64| -> Result<f64> {
            match v {
                None => Ok(default),
                Some(p) if p.is_finite() && p > 0.0 && p <= 100.0 => Ok(p),
                Some(p) => Err(Error::config(
                    format!("{P}.{key}"),
                    format!("expected a percentage from 0 to 100 (above 0), got {p}"),
                )),
            }
        };
        let duration = |d: Option<Duration>, key: &str, default: f64| -> Result<f64> {
            match d {
                None => Ok(default),
                Some(Duration(s)) if s.is_finite() && s > 0.0 => Ok(s),
                Some(Duration(s)) => Err(Error::config(
                    format!("{P}.{key}"),
                    format!("expected a duration above 0, got {s} s"),
                )),
            }
        };
        let count = |n: Option<i64>, key: &str, what: &str, default: u32| -> Result<u32> {
            match n {
                None => Ok(default),
                Some(n) if (1..=MAX_COUNT).contains(&n) => Ok(n as u32),
                Some(n) => Err(Error::config(
                    format!("{P}.{key}"),
                    format!("expected a whole number of {what} from 1 to {MAX_COUNT}, got {n}"),
                )),
            }
        };
        let window_type = match spec.window_type.as_deref() {
            None | Some("count_based") => WindowType::Count,
            Some("time_based") => WindowType::Time,
            Some(other) => {
                return Err(Error::config(
                    format!("{P}.window_type"),
                    format!(
                        "unknown window type {other:?}; expected \"count_based\" or \"time_based\""
                    ),
                ))
            }
        };
        let unit = match window_type {
            WindowType::Count => "calls",
            WindowType::Time => "seconds",
        };
        let window = count(spec.window, "window", unit, DEFAULT_WINDOW)?;
        let min_calls = count(spec.min_calls, "min_calls", "calls", DEFAULT_MIN_CALLS)?;
        Ok(ClientBreaker {
            failure_rate: percent(spec.failure_rate, "failure_rate", DEFAULT_FAILURE_RATE)?,
            slow_call_rate: percent(
                spec.slow_call_rate,
                "slow_call_rate",
                DEFAULT_SLOW_CALL_RATE,
            )?,
            slow_call_duration: duration(
                spec.slow_call_duration,
                "slow_call_duration",
                DEFAULT_SLOW_CALL_DURATION,
            )?,
            window_type,
            window,
            // resilience4j: a count-based window judges once it is full, at the latest.
            min_calls: match window_type {
                WindowType::Count => min_calls.min(window),
                WindowType::Time => min_calls,
            },
            open_for: duration(spec.open_for, "open_for", DEFAULT_OPEN_FOR)?,
            half_open_calls: count(
                spec.half_open_calls,
                "half_open_calls",
                "calls",
                DEFAULT_HALF_OPEN_CALLS,
            )?,
        })
    }

    /// Whether `failed` (and `slow`) of `calls` reach a threshold: resilience4j's
    /// `failureRate >= failureRateThreshold || slowCallRate >= slowCallRateThreshold`, in
    /// exact arithmetic on the counts.
    #[inline]
    pub fn trips(&self, calls: u32, failed: u32, slow: u32) -> bool {
        let calls = f64::from(calls);
        f64::from(failed) * 100.0 >= self.failure_rate * calls
            || f64::from(slow) * 100.0 >= self.slow_call_rate * calls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(json: serde_json::Value) -> Result<ClientBreaker> {
        ClientBreaker::build(&serde_json::from_value(json).expect("a breaker table"))
    }

    fn error(json: serde_json::Value) -> String {
        build(json).expect_err("refused").to_string()
    }

    #[test]
    fn defaults_are_resilience4js() {
        let b = build(serde_json::json!({})).unwrap();
        assert_eq!(
            b,
            ClientBreaker {
                failure_rate: 50.0,
                slow_call_rate: 100.0,
                slow_call_duration: 60.0,
                window_type: WindowType::Count,
                window: 100,
                min_calls: 100,
                open_for: 60.0,
                half_open_calls: 10,
            }
        );
    }

    #[test]
    fn a_count_window_judges_once_full_at_the_latest() {
        let b = build(serde_json::json!({"window": 20, "min_calls": 50})).unwrap();
        assert_eq!(b.min_calls, 20);
        let b =
            build(serde_json::json!({"window": 20, "min_calls": 50, "window_type": "time_based"}))
                .unwrap();
        assert_eq!(b.min_calls, 50);
    }

    #[test]
    fn the_thresholds_are_reached_at_equality() {
        let b = build(serde_json::json!({"failure_rate": 50})).unwrap();
        assert!(b.trips(10, 5, 0));
        assert!(!b.trips(10, 4, 0));
        let b = build(serde_json::json!({"slow_call_rate": 30})).unwrap();
        assert!(b.trips(10, 0, 3));
        assert!(!b.trips(10, 0, 2));
    }

    #[test]
    fn bad_values_name_their_key() {
        for (json, key) in [
            (serde_json::json!({"failure_rate": 0}), "failure_rate"),
            (serde_json::json!({"failure_rate": 150}), "failure_rate"),
            (serde_json::json!({"slow_call_rate": -1}), "slow_call_rate"),
            (
                serde_json::json!({"slow_call_duration": 0}),
                "slow_call_duration",
            ),
            (serde_json::json!({"window_type": "sliding"}), "window_type"),
            (serde_json::json!({"window": 0}), "window"),
            (serde_json::json!({"min_calls": -3}), "min_calls"),
            (serde_json::json!({"open_for": 0}), "open_for"),
            (serde_json::json!({"half_open_calls": 0}), "half_open_calls"),
        ] {
            let e = error(json);
            assert!(e.starts_with(&format!("arrivals.breaker.{key}:")), "{e}");
        }
        assert!(error(serde_json::json!({"failure_rate": 101}))
            .contains("expected a percentage from 0 to 100"));
    }
}
