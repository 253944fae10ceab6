//! The clients' circuit breaker's state and its moves, wherever the clients are: in a
//! simulation (one breaker for every client of a replication; where the tries are checked and
//! outcomes told is in its steps, `sim::resend`) or in front of a real stack (the testbed's
//! load generator asks it before each send and tells it each outcome). Its moves, as
//! resilience4j's state machine makes them:
//! - closed: every try goes; each outcome enters the window; once `min_calls` are in it and a
//!   rate reaches its threshold, it opens (the window emptied);
//! - open: every try is failed at once, for `open_for`; then it is half-open (at that instant,
//!   as resilience4j's automatic transition does; without it resilience4j moves on the first
//!   call after the wait, which is the same for every call);
//! - half-open: `half_open_calls` tries go, the others are failed at once; outcomes recorded
//!   while half-open (those tries', or a late one's) are counted, and when `half_open_calls`
//!   are in it opens again if a rate reaches its threshold, or closes with an empty window.
//!
//! Outcomes that come in while it is open are dropped (resilience4j records them in the open
//! state's own counts, which nothing reads). Times are seconds from the run's start (a
//! time-based window's buckets are its whole seconds).

use super::{ClientBreaker, WindowType};
use std::collections::VecDeque;

/// The breaker's state.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Closed,
    /// Failing every try until this time.
    Open(f64),
    /// Tries let through so far, and the outcomes recorded since it half-opened.
    HalfOpen {
        permitted: u32,
        calls: u32,
        failed: u32,
        slow: u32,
    },
}

/// The closed state's sliding window: each call's outcome (count-based), or each second's
/// counts (time-based), with their totals.
#[derive(Debug, Default, Clone)]
struct Window {
    /// Count-based: (failed, slow) of each call, the oldest first. Time-based: (second,
    /// calls, failed, slow) of each second with calls, the oldest first.
    calls: VecDeque<(bool, bool)>,
    seconds: VecDeque<(i64, u32, u32, u32)>,
    total: u32,
    failed: u32,
    slow: u32,
}

/// One breaker: its configuration and state.
#[derive(Debug, Clone)]
pub struct Breaker {
    config: ClientBreaker,
    state: State,
    window: Window,
}

/// What an outcome did to the breaker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Moved {
    /// Nothing that the figures see.
    No,
    /// It opened now, until this time.
    Opened(f64),
}

impl Breaker {
    /// A closed breaker of this configuration.
    pub fn new(config: ClientBreaker) -> Breaker {
        Breaker {
            config,
            state: State::Closed,
            window: Window::default(),
        }
    }

    /// Whether a try sent at `now` goes (false: it is failed at once).
    #[inline]
    pub fn allows(&mut self, now: f64) -> bool {
        if let State::Open(until) = self.state {
            if now < until {
                return false;
            }
            self.state = State::HalfOpen {
                permitted: 0,
                calls: 0,
                failed: 0,
                slow: 0,
            };
        }
        match &mut self.state {
            State::Closed => true,
            State::HalfOpen { permitted, .. } if *permitted < self.config.half_open_calls => {
                *permitted += 1;
                true
            }
            _ => false,
        }
    }

    /// A try answered at `now`, `seconds` after it was sent, failed or not.
    pub fn record(&mut self, now: f64, seconds: f64, failed: bool) -> Moved {
        let slow = seconds > self.config.slow_call_duration;
        match &mut self.state {
            State::Open(_) => Moved::No,
            State::Closed => {
                let (calls, f, s) = self.window.push(&self.config, now, failed, slow);
                if calls >= self.config.min_calls && self.config.trips(calls, f, s) {
                    self.window = Window::default();
                    self.open(now)
                } else {
                    Moved::No
                }
            }
            State::HalfOpen {
                calls,
                failed: f,
                slow: s,
                ..
            } => {
                *calls += 1;
                *f += u32::from(failed);
                *s += u32::from(slow);
                if *calls < self.config.half_open_calls {
                    return Moved::No;
                }
                if self.config.trips(*calls, *f, *s) {
                    self.open(now)
                } else {
                    self.state = State::Closed;
                    self.window = Window::default();
                    Moved::No
                }
            }
        }
    }

    fn open(&mut self, now: f64) -> Moved {
        let until = now + self.config.open_for;
        self.state = State::Open(until);
        Moved::Opened(until)
    }
}

impl Window {
    /// Adds an outcome at `now`; the window's calls, failed and slow after it.
    fn push(&mut self, c: &ClientBreaker, now: f64, failed: bool, slow: bool) -> (u32, u32, u32) {
        match c.window_type {
            WindowType::Count => {
                if self.calls.len() == c.window as usize {
                    let (f, s) = self.calls.pop_front().expect("a full window");
                    self.total -= 1;
                    self.failed -= u32::from(f);
                    self.slow -= u32::from(s);
                }
                self.calls.push_back((failed, slow));
            }
            WindowType::Time => {
                // resilience4j's buckets of one epoch second: those of the last `window`
                // seconds, this one included.
                let second = now.floor() as i64;
                while let Some(&(at, n, f, s)) = self.seconds.front() {
                    if at > second - i64::from(c.window) {
                        break;
                    }
                    self.seconds.pop_front();
                    self.total -= n;
                    self.failed -= f;
                    self.slow -= s;
                }
                match self.seconds.back_mut() {
                    Some(last) if last.0 == second => {
                        last.1 += 1;
                        last.2 += u32::from(failed);
                        last.3 += u32::from(slow);
                    }
                    _ => self
                        .seconds
                        .push_back((second, 1, u32::from(failed), u32::from(slow))),
                }
            }
        }
        self.total += 1;
        self.failed += u32::from(failed);
        self.slow += u32::from(slow);
        (self.total, self.failed, self.slow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::BreakerSpec;

    fn breaker(json: serde_json::Value) -> Breaker {
        let spec: BreakerSpec = serde_json::from_value(json).unwrap();
        Breaker::new(ClientBreaker::build(&spec).unwrap())
    }

    #[test]
    fn opens_at_the_threshold_once_the_minimum_is_in() {
        let mut b = breaker(serde_json::json!({"window": 10, "min_calls": 4, "open_for": 5}));
        // Three failures: below the minimum.
        for t in 0..3 {
            assert!(b.allows(f64::from(t)));
            assert_eq!(b.record(f64::from(t), 0.1, true), Moved::No);
        }
        // The fourth call: 3 of 4 failed.
        assert_eq!(b.record(3.0, 0.1, false), Moved::Opened(8.0));
        assert!(!b.allows(7.9));
        // Half-open at 8: 10 calls let through, the 11th refused.
        for _ in 0..10 {
            assert!(b.allows(8.0));
        }
        assert!(!b.allows(8.5));
        // Nine successes and a failure: 10% < 50%, closed.
        for _ in 0..9 {
            assert_eq!(b.record(9.0, 0.1, false), Moved::No);
        }
        assert_eq!(b.record(9.0, 0.1, true), Moved::No);
        assert_eq!(b.state, State::Closed);
        assert!(b.allows(9.0));
        assert_eq!(b.window.total, 0);
    }

    #[test]
    fn half_open_failing_opens_again() {
        let mut b = breaker(serde_json::json!({"window": 2, "min_calls": 2, "half_open_calls": 2}));
        b.record(0.0, 0.0, true);
        assert_eq!(b.record(0.0, 0.0, true), Moved::Opened(60.0));
        // Outcomes while open are dropped.
        assert_eq!(b.record(1.0, 0.0, false), Moved::No);
        assert!(b.allows(60.0) && b.allows(60.0) && !b.allows(60.0));
        b.record(61.0, 0.0, false);
        assert_eq!(b.record(61.0, 0.0, true), Moved::Opened(121.0));
    }

    #[test]
    fn a_count_window_forgets_its_oldest_call() {
        let mut b = breaker(serde_json::json!({"window": 4, "min_calls": 4, "failure_rate": 75}));
        for failed in [true, true, false, false, false] {
            assert_eq!(b.record(0.0, 0.0, failed), Moved::No);
        }
        // The first call has left: true, false, false, false.
        assert_eq!((b.window.total, b.window.failed), (4, 1));
        // 1 of 4 failed, then 2 of 4, then 3 of 4 (75%).
        assert_eq!(b.record(0.0, 0.0, true), Moved::No);
        assert_eq!(b.record(0.0, 0.0, true), Moved::No);
        assert_eq!(b.record(0.0, 0.0, true), Moved::Opened(60.0));
    }

    #[test]
    fn a_time_window_forgets_its_oldest_seconds() {
        let mut b =
            breaker(serde_json::json!({"window_type": "time_based", "window": 3, "min_calls": 4}));
        b.record(0.2, 0.0, true);
        b.record(0.7, 0.0, true);
        b.record(1.5, 0.0, false);
        // At 3.0 the seconds 1, 2, 3 are in the window: one call of second 1, and this one.
        assert_eq!(b.record(3.0, 0.0, true), Moved::No);
        assert_eq!((b.window.total, b.window.failed), (2, 1));
        b.record(3.1, 0.0, true);
        // 4 calls, 2 failed: 50%.
        assert_eq!(b.record(3.2, 0.0, false), Moved::Opened(63.2));
    }

    #[test]
    fn slow_calls_open_it_too() {
        let mut b = breaker(serde_json::json!({
            "window": 2, "min_calls": 2, "slow_call_rate": 50, "slow_call_duration": 1
        }));
        assert_eq!(b.record(0.0, 1.0, false), Moved::No);
        assert_eq!(b.record(0.0, 1.5, false), Moved::Opened(60.0));
    }
}
