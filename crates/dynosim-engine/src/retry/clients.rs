//! The clients' retry decisions, wherever the clients are: in a simulation (its retries'
//! state, `sim::retries`) or in front of a real stack (the testbed's load generator). One
//! population of clients shares a [`Decider`]: the policy, its budget's state, and the backoff
//! jitter's stream (`rng::Stream::RetryDelays`), so that the real clients draw their delays
//! from the stream the simulation's draw from, in the order their tries fail.

use super::budget::BudgetState;
use super::{ClientRetry, Failure};
use crate::rng::SimRng;

/// What becomes of a failed try.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Sent again after its backoff (this long): the client waits.
    Retry(f64),
    /// The client gets the error: the policy does not retry this outcome.
    Failed,
    /// The client gets the error: a budget refused a retry it would have made.
    Denied,
    /// The client gets the error: it had made all its tries.
    Exhausted,
}

/// One population of clients' retry decisions.
#[derive(Debug, Clone)]
pub struct Decider {
    policy: ClientRetry,
    budget: Option<BudgetState>,
    delays: SimRng,
}

impl Decider {
    /// Clients retrying as `policy` says, their jitter drawn from `delays`.
    pub fn new(policy: ClientRetry, delays: SimRng) -> Decider {
        Decider {
            budget: policy.budget.map(|b| b.state()),
            policy,
            delays,
        }
    }

    /// Tries in all, the first included.
    pub fn attempts(&self) -> u32 {
        self.policy.attempts
    }

    /// A request's first try is sent at `now`: the budget counts it.
    #[inline]
    pub fn first(&mut self, now: f64) {
        if let Some(b) = self.budget.as_mut() {
            b.request(now);
        }
    }

    /// A try was answered successfully: the budget learns it.
    #[inline]
    pub fn succeeded(&mut self) {
        if let Some(b) = self.budget.as_mut() {
            b.succeeded();
        }
    }

    /// Try `number` (1 for the first), sent after a backoff of `last_delay` (0 for the first),
    /// failed as `failure` at `now`: whether it is retried (and its backoff, drawn now), or
    /// why not.
    pub fn decide(&mut self, number: u32, last_delay: f64, failure: Failure, now: f64) -> Verdict {
        if !self.policy.on.retries(failure) {
            return Verdict::Failed;
        }
        let wanted = number < self.policy.attempts;
        let allowed = match self.budget.as_mut() {
            None => wanted,
            Some(b) => b.failed(now, wanted),
        };
        if !allowed {
            return if wanted {
                Verdict::Denied
            } else {
                Verdict::Exhausted
            };
        }
        Verdict::Retry(
            self.policy
                .backoff
                .delay(number, last_delay, &mut self.delays),
        )
    }
}
