//! Scheduled bursts on top of an open arrival process: a fleet of clients run from cron, all
//! set for the same time, each starting after a drawn delay (its jitter) and sending its
//! requests at once; again every `every` if the burst repeats. Each burst table draws its
//! jitters from a stream of its own ([`Stream::Bursts`], one substream per table), and the base
//! process draws from the arrival stream alone, so the base traffic is the same with or without
//! bursts, and adding a burst table leaves the other tables' draws alone.

use super::ArrivalProcess;
use crate::dist::{self, ServiceDistribution};
use crate::error::{Error, Result};
use crate::params::{check_duration, is_zero_duration, whole};
use crate::rng::{substream, SimRng, Stream};
use crate::units::Duration;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;
use std::sync::Arc;

/// One `[[arrivals.burst]]` table as written.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BurstSpec {
    /// When the clients are set to fire (from the run's start, warm-up included).
    pub at: Duration,
    pub clients: i64,
    /// Requests each client sends when it fires; 1 when left out.
    #[serde(default)]
    pub requests: Option<i64>,
    /// Each client's delay after `at` (a time distribution); none when left out.
    #[serde(default)]
    pub jitter: Option<Value>,
    /// The burst repeats this often; once when left out.
    #[serde(default)]
    pub every: Option<Duration>,
}

/// A burst, checked.
#[derive(Debug)]
pub struct Burst {
    at: f64,
    clients: u32,
    requests: u32,
    jitter: Option<Box<dyn ServiceDistribution>>,
    every: Option<f64>,
    /// `arrivals.burst[i]`, for errors.
    path: String,
}

impl Burst {
    pub fn build(spec: &BurstSpec, index: usize, base_dir: &Path) -> Result<Burst> {
        let path = format!("arrivals.burst[{index}]");
        let at = spec.at.0;
        if !(at.is_finite() && at >= 0.0) {
            return Err(Error::config(
                format!("{path}.at"),
                format!("expected a time >= 0 from the run's start, got {at} s"),
            ));
        }
        let clients = whole(spec.clients, &format!("{path}.clients"), 1, 10_000_000)?;
        let requests = whole(
            spec.requests.unwrap_or(1),
            &format!("{path}.requests"),
            1,
            1_000_000,
        )?;
        let jitter = match &spec.jitter {
            None => None,
            Some(v) if is_zero_duration(v) => None,
            Some(v) => Some(dist::from_value(v, &format!("{path}.jitter"), base_dir)?),
        };
        let every = spec
            .every
            .map(|d| check_duration(d.0, &format!("{path}.every")))
            .transpose()?;
        Ok(Burst {
            at,
            clients,
            requests,
            jitter,
            every,
            path,
        })
    }

    /// When firing `n` (0, 1, ...) starts, or None if the burst does not fire that often.
    fn firing(&self, n: u64) -> Option<f64> {
        match self.every {
            None if n == 0 => Some(self.at),
            None => None,
            Some(every) => Some(self.at + n as f64 * every),
        }
    }

    fn per_firing(&self) -> f64 {
        f64::from(self.clients) * f64::from(self.requests)
    }
}

/// An open process with bursts on top.
#[derive(Debug)]
pub struct Superposed {
    base: Box<dyn ArrivalProcess>,
    bursts: Arc<Vec<Burst>>,
    state: Option<State>,
}

#[derive(Debug)]
struct State {
    rngs: Vec<SimRng>,
    /// The next firing of each burst not yet drawn.
    firings: Vec<u64>,
    /// Drawn burst arrivals not yet handed out, as the bits of their times (>= 0, so the
    /// bits order as the times do).
    pending: BinaryHeap<Reverse<u64>>,
    /// The base process's next arrival (None once it has ended), drawn ahead.
    base_next: Option<f64>,
    started: bool,
}

impl Superposed {
    pub fn new(base: Box<dyn ArrivalProcess>, bursts: Vec<Burst>) -> Superposed {
        Superposed {
            base,
            bursts: Arc::new(bursts),
            state: None,
        }
    }
}

impl ArrivalProcess for Superposed {
    fn next_arrival(&mut self, now: f64, rng: &mut SimRng) -> Option<f64> {
        let state = self
            .state
            .as_mut()
            .expect("a superposed process is used through fresh()");
        if !state.started {
            // The first call: the base's first arrival after `now`, as it would be alone.
            state.started = true;
            state.base_next = self.base.next_arrival(now, rng);
        }
        loop {
            let head = state.pending.peek().map(|r| f64::from_bits(r.0));
            let next = match (head, state.base_next) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // Draw every firing that starts by the earliest arrival known (all of its
            // arrivals come at or after its start).
            let mut drew = false;
            for (i, burst) in self.bursts.iter().enumerate() {
                let Some(start) = burst.firing(state.firings[i]) else {
                    continue;
                };
                if next.is_some_and(|t| start > t) {
                    continue;
                }
                state.firings[i] += 1;
                drew = true;
                let rng = &mut state.rngs[i];
                for _ in 0..burst.clients {
                    let delay = burst.jitter.as_ref().map_or(0.0, |j| j.sample(rng));
                    let t = (start + delay).to_bits();
                    for _ in 0..burst.requests {
                        state.pending.push(Reverse(t));
                    }
                }
            }
            if drew {
                continue;
            }
            if let Some(a) = head {
                if state.base_next.map_or(true, |b| a <= b) {
                    state.pending.pop();
                    return Some(a);
                }
            }
            let b = state.base_next?;
            state.base_next = self.base.next_arrival(b, rng);
            return Some(b);
        }
    }

    fn mean_rate(&self) -> f64 {
        // A burst that fires once is transient; a repeating one adds its requests per period.
        self.base.mean_rate()
            + self
                .bursts
                .iter()
                .filter_map(|b| b.every.map(|every| b.per_firing() / every))
                .sum::<f64>()
    }

    fn expected(&self, from: f64, to: f64) -> f64 {
        let mut total = self.base.expected(from, to);
        for b in self.bursts.iter() {
            // Counted at the firing's start (the jitter moves a few across `to`).
            let firings = match b.every {
                None => f64::from(u8::from(b.at >= from && b.at < to)),
                Some(every) => {
                    let first = ((from - b.at) / every).ceil().max(0.0);
                    let last = ((to - b.at) / every).ceil();
                    (last - first).max(0.0)
                }
            };
            total += firings * b.per_firing();
        }
        total
    }

    fn peak_rate(&self, to: f64) -> f64 {
        self.base.peak_rate(to)
    }

    fn check_within(&self, end: f64) -> Result<()> {
        self.base.check_within(end)?;
        for b in self.bursts.iter() {
            if b.at >= end {
                return Err(Error::config(
                    format!("{}.at", b.path),
                    format!(
                        "the burst is set for {} s, at or after the run's end (run.warmup + \
                         run.duration = {end} s); expected a time before it",
                        b.at
                    ),
                ));
            }
        }
        Ok(())
    }

    fn fresh(&self, seed: u64, replication: u64) -> Box<dyn ArrivalProcess> {
        let n = self.bursts.len();
        Box::new(Superposed {
            base: self.base.fresh(seed, replication),
            bursts: Arc::clone(&self.bursts),
            state: Some(State {
                rngs: (0..n as u64)
                    .map(|i| substream(seed, replication, Stream::Bursts, i))
                    .collect(),
                firings: vec![0; n],
                pending: BinaryHeap::new(),
                base_next: None,
                started: false,
            }),
        })
    }
}
