//! Retry budgets: what lets a client retry only while retries stay a small part of its
//! traffic, so that a failing service does not get its load multiplied.
//!
//! - `kind = "grpc"`: gRPC's `retryThrottling` (gRFC A6, "gRPC Retry Design"; grpc-core's
//!   `ServerRetryThrottleData`). A token count starts at `max_tokens`; an attempt that fails
//!   with a retried outcome takes 1 (not below 0), a success gives back `token_ratio` (not above
//!   `max_tokens`); a retry may go only while the count, after the failure's token is taken,
//!   is above `max_tokens / 2`. Defaults: the gRFC's example, 10 tokens and 0.1.
//! - `kind = "finagle"`: Finagle's `RetryBudget(ttl, minRetriesPerSec, percentCanRetry)`
//!   (finagle-core `RetryBudget.scala`, util `TokenBucket.newLeakyBucket`). Every request
//!   deposits 1000 milli-tokens, a retry withdraws 1000 / (`percent` / 100); deposits and
//!   withdrawals expire after `ttl`, counted in ten slices of `ttl / 10` (util's
//!   `WindowedAdder`); a reserve of `min_per_s × ttl` retries is always there. Defaults:
//!   Finagle's, 20%, 10 a second, 10 s.
//!
//! The budget is the clients' together: one channel, as a service's clients (or one
//! upstream tier) behind one library share it.

use crate::error::{Error, Result};
use crate::params::Params;
use crate::registry::Registry;
use crate::units::Duration;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `arrivals.retry.budget` as written: `kind` and its settings.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct BudgetSpec {
    /// "grpc" or "finagle" ([`REGISTRY`]).
    pub kind: String,
    #[serde(flatten)]
    pub params: Map<String, Value>,
}

/// gRPC's example `retryThrottling` (gRFC A6).
pub const GRPC_MAX_TOKENS: f64 = 10.0;
pub const GRPC_TOKEN_RATIO: f64 = 0.1;
/// Finagle's `RetryBudget()` defaults.
pub const FINAGLE_PERCENT: f64 = 20.0;
pub const FINAGLE_MIN_PER_S: f64 = 10.0;
pub const FINAGLE_TTL: f64 = 10.0;

/// Finagle's fixed-point scale: a deposit's milli-tokens.
const SCALE: i64 = 1000;
/// util's `WindowedAdder`: the window in ten slices.
const SLICES: usize = 10;

/// A budget kind's builder.
pub type Builder = fn(&Params) -> Result<RetryBudget>;

/// The kinds of budget: a new one is a builder and a line here.
pub const REGISTRY: Registry<Builder> = Registry(&[
    ("grpc", &["max_tokens", "token_ratio"], grpc),
    ("finagle", &["percent", "min_per_s", "ttl"], finagle),
]);

fn grpc(p: &Params) -> Result<RetryBudget> {
    let max_tokens = p.get::<f64>("max_tokens")?.unwrap_or(GRPC_MAX_TOKENS);
    if !(max_tokens.is_finite() && (1.0..=1000.0).contains(&max_tokens)) {
        return Err(p.error(
            "max_tokens",
            format!("must be from 1 to 1000 (gRPC's bounds), got {max_tokens}"),
        ));
    }
    let token_ratio = p.get::<f64>("token_ratio")?.unwrap_or(GRPC_TOKEN_RATIO);
    if !(token_ratio.is_finite() && token_ratio > 0.0 && token_ratio <= 1.0) {
        return Err(p.error(
            "token_ratio",
            format!(
                "must be above 0 and at most 1 (tokens a success gives back; a failure takes 1), \
                 got {token_ratio}"
            ),
        ));
    }
    Ok(RetryBudget::Grpc {
        max_tokens,
        token_ratio,
    })
}

fn finagle(p: &Params) -> Result<RetryBudget> {
    let percent = p.get::<f64>("percent")?.unwrap_or(FINAGLE_PERCENT);
    if !(percent.is_finite() && (0.0..=100.0).contains(&percent)) {
        return Err(p.error(
            "percent",
            format!("must be from 0 to 100 (retries per 100 requests), got {percent}"),
        ));
    }
    let min_per_s = p.get::<f64>("min_per_s")?.unwrap_or(FINAGLE_MIN_PER_S);
    if !(min_per_s.is_finite() && min_per_s >= 0.0) {
        return Err(p.error(
            "min_per_s",
            format!("must be 0 or more retries a second, got {min_per_s}"),
        ));
    }
    let ttl = p.get::<Duration>("ttl")?.map_or(FINAGLE_TTL, |d| d.0);
    if !(1.0..=60.0).contains(&ttl) {
        return Err(p.error(
            "ttl",
            format!("must be from 1 s to 60 s (Finagle's bounds), got {ttl} s"),
        ));
    }
    if percent == 0.0 && min_per_s == 0.0 {
        return Err(p.error(
            "percent",
            "percent = 0 and min_per_s = 0 allow no retry at all; give arrivals.retry.attempts \
             = 1 instead",
        ));
    }
    Ok(RetryBudget::Finagle {
        percent,
        min_per_s,
        ttl,
    })
}

/// A budget's kind and settings, built; [`RetryBudget::state`] makes a replication's own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RetryBudget {
    Grpc {
        max_tokens: f64,
        token_ratio: f64,
    },
    Finagle {
        percent: f64,
        min_per_s: f64,
        ttl: f64,
    },
}

impl RetryBudget {
    /// Builds the table at `path` (`arrivals.retry.budget`).
    pub fn build(spec: &BudgetSpec, path: &str) -> Result<RetryBudget> {
        let (keys, build) = REGISTRY.lookup(&spec.kind).ok_or_else(|| {
            Error::config(
                format!("{path}.kind"),
                format!(
                    "unknown budget kind {:?}; expected one of: {}",
                    spec.kind,
                    REGISTRY.names().join(", ")
                ),
            )
        })?;
        let p = Params::new(path, &spec.kind, &spec.params);
        p.allow(keys)?;
        build(&p)
    }

    /// A fresh state, for one replication.
    pub fn state(&self) -> BudgetState {
        match *self {
            RetryBudget::Grpc {
                max_tokens,
                token_ratio,
            } => BudgetState::Grpc {
                tokens: max_tokens,
                max_tokens,
                token_ratio,
            },
            RetryBudget::Finagle {
                percent,
                min_per_s,
                ttl,
            } => {
                let (deposit, withdrawal) = if percent == 0.0 {
                    (0, 1)
                } else {
                    (SCALE, (SCALE as f64 / (percent / 100.0)) as i64)
                };
                BudgetState::Finagle(Box::new(LeakyBucket {
                    deposit,
                    withdrawal,
                    // Finagle's `minRetriesPerSec * ttl.inSeconds * withdrawalAmount`, ttl in
                    // whole seconds.
                    reserve: (min_per_s * ttl.floor()) as i64 * withdrawal,
                    slice: ttl / SLICES as f64,
                    sums: [0; SLICES],
                    slice_of: [i64::MIN; SLICES],
                }))
            }
        }
    }
}

/// A budget's state in one replication.
#[derive(Debug, Clone)]
pub enum BudgetState {
    Grpc {
        tokens: f64,
        max_tokens: f64,
        token_ratio: f64,
    },
    Finagle(Box<LeakyBucket>),
}

impl BudgetState {
    /// A client sends a new request (its first try): Finagle's deposit.
    #[inline]
    pub fn request(&mut self, now: f64) {
        if let BudgetState::Finagle(bucket) = self {
            let d = bucket.deposit;
            bucket.add(now, d);
        }
    }

    /// A try was answered successfully: gRPC's token back.
    #[inline]
    pub fn succeeded(&mut self) {
        if let BudgetState::Grpc {
            tokens,
            max_tokens,
            token_ratio,
        } = self
        {
            *tokens = (*tokens + *token_ratio).min(*max_tokens);
        }
    }

    /// A try failed with an outcome the clients retry; `wanted`: it has tries left. Returns
    /// whether the retry may go (false whenever not `wanted`). gRPC takes the failure's token
    /// whether or not a retry is wanted, as grpc-core does before it counts attempts; Finagle
    /// withdraws only for a retry that goes.
    pub fn failed(&mut self, now: f64, wanted: bool) -> bool {
        match self {
            BudgetState::Grpc {
                tokens, max_tokens, ..
            } => {
                *tokens = (*tokens - 1.0).max(0.0);
                wanted && *tokens > *max_tokens / 2.0
            }
            BudgetState::Finagle(bucket) => wanted && bucket.try_withdraw(now),
        }
    }

    /// Retries the budget would allow now (for reports and tests).
    pub fn balance(&mut self, now: f64) -> f64 {
        match self {
            BudgetState::Grpc {
                tokens, max_tokens, ..
            } => (*tokens - *max_tokens / 2.0).max(0.0),
            BudgetState::Finagle(bucket) => (bucket.count(now) / bucket.withdrawal) as f64,
        }
    }
}

/// util's leaky `TokenBucket`: a windowed sum of deposits and withdrawals, plus a reserve.
#[derive(Debug, Clone)]
pub struct LeakyBucket {
    deposit: i64,
    withdrawal: i64,
    reserve: i64,
    /// A slice's length, s.
    slice: f64,
    /// Each slice's sum, at `slice_of`'s index modulo [`SLICES`].
    sums: [i64; SLICES],
    slice_of: [i64; SLICES],
}

impl LeakyBucket {
    #[inline]
    fn index(&self, now: f64) -> i64 {
        (now / self.slice).floor() as i64
    }

    fn add(&mut self, now: f64, amount: i64) {
        let i = self.index(now);
        let at = i.rem_euclid(SLICES as i64) as usize;
        if self.slice_of[at] != i {
            self.slice_of[at] = i;
            self.sums[at] = 0;
        }
        self.sums[at] += amount;
    }

    /// The window's sum (the last [`SLICES`] slices, the current one included) and the reserve.
    fn count(&self, now: f64) -> i64 {
        let i = self.index(now);
        let live = |k: usize| self.slice_of[k] > i - SLICES as i64 && self.slice_of[k] <= i;
        (0..SLICES)
            .filter(|&k| live(k))
            .map(|k| self.sums[k])
            .sum::<i64>()
            + self.reserve
    }

    fn try_withdraw(&mut self, now: f64) -> bool {
        let ok = self.count(now) >= self.withdrawal;
        if ok {
            let w = self.withdrawal;
            self.add(now, -w);
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(json: serde_json::Value) -> Result<RetryBudget> {
        let spec: BudgetSpec = serde_json::from_value(json).expect("a budget table");
        RetryBudget::build(&spec, "arrivals.retry.budget")
    }

    /// grpc-core's own test (`retry_throttle_test.cc`, "Basic"): 4 tokens, ratio 1.6.
    #[test]
    fn grpc_follows_grpc_cores_test() {
        let mut b = RetryBudget::Grpc {
            max_tokens: 4.0,
            token_ratio: 1.6,
        }
        .state();
        assert!(b.failed(0.0, true)); // 3, above 2
        b.succeeded(); // 4, not beyond the max
        assert!(b.failed(0.0, true)); // 3
        assert!(!b.failed(0.0, true)); // 2: at the threshold, no retry
        assert!(!b.failed(0.0, true)); // 1
        b.succeeded(); // 2.6
        assert!(!b.failed(0.0, true)); // 1.6
        b.succeeded(); // 3.2
        assert!(b.failed(0.0, true)); // 2.2: above 2
    }

    #[test]
    fn grpc_takes_a_token_even_with_no_tries_left() {
        let mut b = RetryBudget::Grpc {
            max_tokens: 10.0,
            token_ratio: 0.1,
        }
        .state();
        assert!(!b.failed(0.0, false));
        assert_eq!(b.balance(0.0), 4.0);
    }

    /// With each try failing with probability f, clients free to retry make 1/(1 − f) tries a
    /// request. gRPC's throttle drains (a failure takes 1, a success gives r) exactly when
    /// f > r/(1 + r): then retries stop and a request makes 1 try; below, it never binds.
    /// Either way tries per request stay under 1 + r, the most being at f = r/(1 + r).
    #[test]
    fn grpc_caps_amplification_at_one_plus_the_ratio() {
        use rand::{Rng, SeedableRng};
        let r = 0.25;
        let tries_per_request = |f: f64| {
            let mut b = RetryBudget::Grpc {
                max_tokens: 100.0,
                token_ratio: r,
            }
            .state();
            let mut rng = crate::rng::SimRng::seed_from_u64(3);
            let requests = 200_000;
            let mut tries = 0u64;
            for _ in 0..requests {
                loop {
                    tries += 1;
                    if rng.random::<f64>() >= f {
                        b.succeeded();
                        break;
                    }
                    if !b.failed(0.0, true) {
                        break;
                    }
                }
            }
            tries as f64 / requests as f64
        };
        // Tries per request are a ratio of sums over 200,000 requests: its standard error is
        // under 0.003 for these f; 0.01 is over three of them.
        for f in [0.05, 0.1, 0.15] {
            let a = tries_per_request(f);
            assert!((a - 1.0 / (1.0 - f)).abs() < 0.01, "f {f}: {a}");
        }
        for f in [0.3, 0.5, 0.8] {
            let a = tries_per_request(f);
            assert!((a - 1.0).abs() < 0.01, "f {f}: {a}");
        }
        for f in [0.18, 0.2, 0.22] {
            let a = tries_per_request(f);
            assert!(a <= 1.0 + r + 0.01, "f {f}: {a}");
        }
    }

    #[test]
    fn finagle_allows_the_reserve_then_its_percent() {
        // 20%, 10 a second, 10 s: a reserve of 100 retries.
        let mut b = RetryBudget::Finagle {
            percent: 20.0,
            min_per_s: 10.0,
            ttl: 10.0,
        }
        .state();
        let allowed = (0..1000).filter(|_| b.failed(0.5, true)).count();
        assert_eq!(allowed, 100);
        // 50 requests buy 10 retries.
        for _ in 0..50 {
            b.request(0.5);
        }
        let allowed = (0..1000).filter(|_| b.failed(0.5, true)).count();
        assert_eq!(allowed, 10);
        // After the window the withdrawals have expired: the reserve again.
        let allowed = (0..1000).filter(|_| b.failed(10.6, true)).count();
        assert_eq!(allowed, 100);
    }

    #[test]
    fn finagle_deposits_expire_after_the_ttl() {
        let mut b = RetryBudget::Finagle {
            percent: 50.0,
            min_per_s: 0.0,
            ttl: 1.0,
        }
        .state();
        for _ in 0..10 {
            b.request(0.0);
        }
        assert_eq!(b.balance(0.0), 5.0);
        assert_eq!(b.balance(0.95), 5.0);
        assert_eq!(b.balance(1.0), 0.0);
        assert!(!b.failed(1.0, true));
    }

    #[test]
    fn bad_budgets_name_their_key() {
        let e = |j| build(j).expect_err("refused").to_string();
        assert!(e(serde_json::json!({"kind": "grpc", "token_ratio": 1.5}))
            .starts_with("arrivals.retry.budget.token_ratio:"));
        assert!(e(serde_json::json!({"kind": "grpc", "max_tokens": 0}))
            .starts_with("arrivals.retry.budget.max_tokens:"));
        assert!(e(serde_json::json!({"kind": "grpc", "percent": 10}))
            .starts_with("arrivals.retry.budget.percent:"));
        assert!(e(serde_json::json!({"kind": "finagle", "ttl": 90}))
            .starts_with("arrivals.retry.budget.ttl:"));
        assert!(e(serde_json::json!({"kind": "finagle", "percent": 120}))
            .starts_with("arrivals.retry.budget.percent:"));
        assert!(e(serde_json::json!({"kind": "envoy"})).starts_with("arrivals.retry.budget.kind:"));
    }

    #[test]
    fn defaults_are_the_sources() {
        assert_eq!(
            build(serde_json::json!({"kind": "grpc"})).unwrap(),
            RetryBudget::Grpc {
                max_tokens: 10.0,
                token_ratio: 0.1
            }
        );
        assert_eq!(
            build(serde_json::json!({"kind": "finagle"})).unwrap(),
            RetryBudget::Finagle {
                percent: 20.0,
                min_per_s: 10.0,
                ttl: 10.0
            }
        );
    }
}
