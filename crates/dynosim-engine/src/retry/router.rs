//! Router retries (`router.retry_on`, `router.retry_budget`): a router that tried a dyno and
//! got a timeout or an error back tries another, as HAProxy's `retry-on` with
//! `option redispatch` and nginx's `proxy_next_upstream` do; a dyno's refusal of the
//! connection (a full `app.backlog`) is the one outcome Heroku's router retries, and stays the
//! default. The tries a request may have beyond its first are `router.retries`, whatever made
//! the router try again. A retry after a timeout leaves the first dyno working (it is not
//! told): what it does from then on is work done for nobody (`wasted`).
//!
//! `router.retry_budget` caps the retries in flight at once, as Envoy's `retry_budget` does:
//! a retry is allowed while the router's retries in flight are fewer than `percent` of its
//! requests in flight, or `min_concurrency`, whichever is more (Envoy's defaults: 20% and 3,
//! envoy/config/cluster/v3/circuit_breaker.proto). It counts the retries after a timeout or an
//! error; a refused connection, which no dyno worked on, is retried as before.

use crate::error::{Error, Result};
use crate::params::whole;
use crate::result::ErrorKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Envoy's `retry_budget` defaults.
pub const DEFAULT_BUDGET_PERCENT: f64 = 20.0;
pub const DEFAULT_MIN_CONCURRENCY: u32 = 3;

/// What a router retries beyond a refused connection, and its budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RouterRetry {
    /// `"refused"`: a dyno refused the connection (its backlog was full): try another.
    pub refused: bool,
    /// `"timeout"`: `router.timeout` came first (H12): try another dyno, the first working on.
    pub timeout: bool,
    /// `"5xx"`: the dyno answered an error, or died with the request (the app's outage,
    /// `wait_timeout` or `service_timeout`, `app.timeout`'s kill, R15, a crash, a shutdown's
    /// SIGKILL).
    pub errors: bool,
    pub budget: Option<RouterBudget>,
}

/// Envoy's retry budget: retries in flight below `max(min_concurrency, percent % of the
/// requests in flight)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RouterBudget {
    pub percent: f64,
    pub min_concurrency: u32,
}

impl RouterBudget {
    /// Whether one more retry may go, with `retries` retries and `requests` requests in flight.
    #[inline]
    pub fn allows(&self, retries: usize, requests: u64) -> bool {
        let cap = (self.percent / 100.0 * requests as f64).max(f64::from(self.min_concurrency));
        (retries as f64) < cap
    }
}

/// Today's behaviour: refused connections only.
pub const REFUSED_ONLY: RouterRetry = RouterRetry {
    refused: true,
    timeout: false,
    errors: false,
    budget: None,
};

impl RouterRetry {
    /// Whether a try answered with `error` after the router sent it to a dyno is sent to
    /// another (refusals are the router's own path: see `refused`).
    #[inline]
    pub fn retries(&self, error: ErrorKind) -> bool {
        match error {
            ErrorKind::H12 => self.timeout,
            ErrorKind::AppTimeout
            | ErrorKind::R15
            | ErrorKind::Shutdown
            | ErrorKind::Outage
            | ErrorKind::Crashed
            | ErrorKind::WaitTimeout
            | ErrorKind::ServiceTimeout
            | ErrorKind::ResourceTimeout
            | ErrorKind::CallFailed
            // A dyno's limit answered 503 (the router's own never reaches a dyno).
            | ErrorKind::LimitRejected => self.errors,
            ErrorKind::H11
            | ErrorKind::H13
            | ErrorKind::ClientTimeout
            | ErrorKind::QueueTimeout
            | ErrorKind::Shed
            | ErrorKind::NoDyno
            | ErrorKind::BreakerOpen => false,
        }
    }

    /// Whether it does more than today's (a retry after a timeout or an error).
    pub fn beyond_refused(&self) -> bool {
        self.timeout || self.errors
    }

    /// `router.retry_on` and `router.retry_budget` as written (None: left out).
    pub fn parse(on: Option<&Value>, budget: Option<&RouterBudgetSpec>) -> Result<RouterRetry> {
        const PATH: &str = "router.retry_on";
        let mut r = match on {
            None => REFUSED_ONLY,
            Some(value) => {
                let on = super::outcomes(value, PATH)?;
                RouterRetry {
                    refused: on.refused,
                    timeout: on.timeout,
                    errors: on.errors,
                    budget: None,
                }
            }
        };
        r.budget = match budget {
            None => None,
            Some(spec) => Some(parse_budget(spec)?),
        };
        if r.budget.is_some() && !r.beyond_refused() {
            return Err(Error::config(
                "router.retry_budget",
                "a budget caps retries after a timeout or an error: give router.retry_on \
                 \"timeout\" or \"5xx\" too",
            ));
        }
        Ok(r)
    }
}

/// `router.retry_budget` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RouterBudgetSpec {
    #[serde(default)]
    pub percent: Option<f64>,
    #[serde(default)]
    pub min_concurrency: Option<i64>,
}

fn parse_budget(spec: &RouterBudgetSpec) -> Result<RouterBudget> {
    let percent = match spec.percent {
        None => DEFAULT_BUDGET_PERCENT,
        Some(p) if (0.0..=100.0).contains(&p) => p,
        Some(p) => {
            return Err(Error::config(
                "router.retry_budget.percent",
                format!("expected a percentage from 0 to 100, got {p}"),
            ))
        }
    };
    let min_concurrency = match spec.min_concurrency {
        None => DEFAULT_MIN_CONCURRENCY,
        Some(n) => whole(n, "router.retry_budget.min_concurrency", 0, 1_000_000)?,
    };
    Ok(RouterBudget {
        percent,
        min_concurrency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn left_out_it_retries_refusals_only() {
        let r = RouterRetry::parse(None, None).unwrap();
        assert_eq!(r, REFUSED_ONLY);
        assert!(!r.beyond_refused());
        assert!(!r.retries(ErrorKind::H12));
    }

    #[test]
    fn the_outcomes_map_to_the_errors() {
        let r = RouterRetry::parse(Some(&json!(["timeout"])), None).unwrap();
        assert!(!r.refused && r.timeout && !r.errors);
        assert!(r.retries(ErrorKind::H12));
        assert!(!r.retries(ErrorKind::Outage));
        let r = RouterRetry::parse(Some(&json!(["refused", "5xx"])), None).unwrap();
        assert!(r.refused && r.errors && !r.timeout);
        for e in [
            ErrorKind::Outage,
            ErrorKind::R15,
            ErrorKind::Crashed,
            ErrorKind::WaitTimeout,
        ] {
            assert!(r.retries(e));
        }
        // Never reached a dyno, or the client's own: not the router's to retry.
        for e in [
            ErrorKind::H11,
            ErrorKind::NoDyno,
            ErrorKind::ClientTimeout,
            ErrorKind::QueueTimeout,
        ] {
            assert!(!r.retries(e));
        }
    }

    #[test]
    fn the_budget_takes_envoys_defaults_and_rule() {
        let r = RouterRetry::parse(
            Some(&json!(["timeout"])),
            Some(&RouterBudgetSpec::default()),
        )
        .unwrap();
        let b = r.budget.unwrap();
        assert_eq!((b.percent, b.min_concurrency), (20.0, 3));
        // 10 in flight: max(3, 2) = 3 retries at once; 100 in flight: 20.
        assert!(b.allows(2, 10) && !b.allows(3, 10));
        assert!(b.allows(19, 100) && !b.allows(20, 100));
    }

    #[test]
    fn bad_input_names_the_key() {
        let e = RouterRetry::parse(Some(&json!(["timeout", "502"])), None).unwrap_err();
        assert!(e.to_string().contains("router.retry_on[1]"), "{e}");
        let too_much = RouterBudgetSpec {
            percent: Some(120.0),
            min_concurrency: None,
        };
        let e = RouterRetry::parse(Some(&json!(["timeout"])), Some(&too_much)).unwrap_err();
        assert!(e.to_string().contains("router.retry_budget.percent"), "{e}");
        let e = RouterRetry::parse(None, Some(&RouterBudgetSpec::default())).unwrap_err();
        assert!(e.to_string().contains("router.retry_budget"), "{e}");
    }
}
