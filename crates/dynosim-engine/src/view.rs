//! Late load information (`router.view`): what the routers read of the dynos' loads, and how
//! old it is.
//!
//! Under `exact` (the default) each router reads its own counts, up to date event by event:
//! the requests it sent itself and that are not yet answered (a partial view when there are
//! several routers). Under the other updates every router reads one bulletin board for the
//! fleet, which shows each dyno's load, the requests in flight there from all routers (what
//! the dyno would report), as it was at some earlier time (Mitzenmacher, "How useful is old
//! information?", IEEE TPDS 11(1), 2000):
//! - `periodic`: as of the board's last refresh; every entry is refreshed at once, every
//!   `interval` (the first refresh at time 0).
//! - `delayed`: exactly `interval` ago; every change of a dyno's load reaches the board
//!   `interval` after it happened.
//! - `individual`: as of the dyno's own last refresh; each dyno refreshes its entry at
//!   exponential intervals of mean `interval`, independently of the others.
//!
//! A router's own requests sent since the board last showed them are not on it: routers that
//! read a late board all pile onto the dynos it shows least loaded (the herd effect).
//!
//! Policies read the board through the same [`crate::policy::RouterView`] as their own
//! counts; a policy that reads no load ([`crate::policy::Knowledge::Nothing`]) reads no board
//! either, and a view other than `exact` changes nothing for it.

use crate::alloc::filled;
use crate::error::{Error, Result};
use crate::in_flight::{LoadIndex, Ties};
use crate::params::check_duration;
use crate::rng::SimRng;
use crate::units::Duration;
use rand::Rng;
use rand_distr::{Distribution, Exp};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// `router.view` as written: `{ update = "periodic", interval = "2s" }`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ViewSpec {
    /// exact, periodic, delayed or individual.
    #[serde(default)]
    pub update: Option<String>,
    /// How old the information gets: the refresh period, the delay, or each dyno's mean time
    /// between refreshes.
    #[serde(default)]
    pub interval: Option<Duration>,
}

/// How the board the routers read is kept (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Update {
    /// Each router's own counts, up to date (no board).
    Exact,
    /// Every entry refreshed at once, every interval.
    Periodic,
    /// Every entry exactly interval old.
    Delayed,
    /// Each entry refreshed at exponential intervals of mean interval, on its own.
    Individual,
}

impl Update {
    pub const NAMES: &'static str = "exact, periodic, delayed or individual";

    pub fn name(self) -> &'static str {
        match self {
            Update::Exact => "exact",
            Update::Periodic => "periodic",
            Update::Delayed => "delayed",
            Update::Individual => "individual",
        }
    }

    fn parse(name: &str) -> Option<Update> {
        Some(match name {
            "exact" => Update::Exact,
            "periodic" => Update::Periodic,
            "delayed" => Update::Delayed,
            "individual" => Update::Individual,
            _ => return None,
        })
    }
}

/// `router.view`, checked: how late the loads the routers read are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct View {
    pub update: Update,
    /// Seconds (0 under `exact`).
    pub interval: f64,
}

impl View {
    /// Today's routers: each reads its own counts, up to date.
    pub const EXACT: View = View {
        update: Update::Exact,
        interval: 0.0,
    };

    pub fn build(spec: Option<&ViewSpec>) -> Result<View> {
        let Some(spec) = spec else {
            return Ok(View::EXACT);
        };
        let update = match spec.update.as_deref() {
            None if spec.interval.is_some() => {
                return Err(Error::config(
                    "router.view.update",
                    format!(
                        "missing: an interval is given; say how the board is kept ({})",
                        Update::NAMES
                    ),
                ))
            }
            None => Update::Exact,
            Some(name) => Update::parse(name).ok_or_else(|| {
                Error::config(
                    "router.view.update",
                    format!("unknown update {name:?}; expected {}", Update::NAMES),
                )
            })?,
        };
        let interval = match (update, spec.interval) {
            (Update::Exact, None) => 0.0,
            (Update::Exact, Some(_)) => {
                return Err(Error::config(
                    "router.view.interval",
                    "exact reads every load as it is, with no interval; give update = \
                     \"periodic\", \"delayed\" or \"individual\" for late loads",
                ))
            }
            (other, None) => {
                return Err(Error::config(
                    "router.view.interval",
                    format!(
                        "missing: {} needs an interval, a duration > 0 (e.g. \"2s\")",
                        other.name()
                    ),
                ))
            }
            (_, Some(Duration(seconds))) => check_duration(seconds, "router.view.interval")?,
        };
        Ok(View { update, interval })
    }

    pub fn is_exact(&self) -> bool {
        self.update == Update::Exact
    }
}

/// One change of a dyno's true load on its way to a `delayed` board.
#[derive(Debug, Clone, Copy)]
struct Change {
    /// When the board shows it.
    due: f64,
    dyno: u32,
    /// One more request (true) or one fewer.
    up: bool,
}

/// The board every router reads under a view other than `exact`: each dyno's true load,
/// and the loads shown, ranked as the policy needs ([`LoadIndex`]).
///
/// Its memory is a few words per dyno slot, and for `delayed` the changes of the last
/// interval (about twice the requests that arrive in one): none of it grows with the run.
#[derive(Debug, Clone)]
pub struct Board {
    update: Update,
    interval: f64,
    /// Requests in flight at each dyno slot from every router: sent, not yet answered or let
    /// go (what the routers would count together).
    truth: Vec<u32>,
    /// What the routers read.
    shown: LoadIndex,
    /// `periodic`: the slots whose true load changed since the last refresh, each once
    /// (`marked`), so that a refresh costs the changes, not the fleet.
    changed: Vec<u32>,
    marked: Vec<bool>,
    /// `periodic`: refreshes done; the next is due at (refreshes + 1) · interval.
    refreshes: u64,
    /// `delayed`: the changes not yet shown, oldest first (a FIFO: the delay is constant).
    pending: VecDeque<Change>,
    /// `individual`: the time to the next refresh of any slot (each slot refreshes at rate
    /// 1 / interval: together, at slots / interval, each refresh a slot drawn uniformly); and
    /// its draws, from a stream of the board's own.
    gap: Option<Exp<f64>>,
    rng: SimRng,
}

impl Board {
    /// A board for `slots` dyno slots, the first `up` of them up, ranked as `ranking` says
    /// (None: counts only). `view` is not `exact`.
    pub fn new(
        view: View,
        slots: usize,
        up: usize,
        ranking: Option<Ties>,
        rng: SimRng,
    ) -> Result<Board> {
        debug_assert!(!view.is_exact(), "an exact view has no board");
        let mut shown = LoadIndex::new(slots, ranking)?;
        for d in up..slots {
            shown.park(d);
        }
        let gap = (view.update == Update::Individual)
            .then(|| Exp::new(slots as f64 / view.interval).expect("a positive rate"));
        Ok(Board {
            update: view.update,
            interval: view.interval,
            truth: filled(slots, 0)?,
            shown,
            changed: Vec::new(),
            marked: if view.update == Update::Periodic {
                filled(slots, false)?
            } else {
                Vec::new()
            },
            refreshes: 0,
            pending: VecDeque::new(),
            gap,
            rng,
        })
    }

    /// Bytes per dyno slot: the true and shown counts, the periodic marks.
    pub const BYTES_PER_DYNO: f64 = 2.0 * 4.0 + 1.0 + 4.0;

    pub fn update(&self) -> Update {
        self.update
    }

    /// The loads the routers read.
    #[inline]
    pub fn shown(&self) -> &LoadIndex {
        &self.shown
    }

    /// Requests in flight at `dyno` now, from every router.
    #[inline]
    pub fn true_load(&self, dyno: usize) -> u32 {
        self.truth[dyno]
    }

    /// When the board's first event is due (a refresh), if it has one before any change.
    pub fn first_event(&mut self) -> Option<f64> {
        match self.update {
            Update::Periodic => Some(self.interval),
            Update::Individual => Some(self.next_gap()),
            Update::Delayed | Update::Exact => None,
        }
    }

    fn next_gap(&mut self) -> f64 {
        self.gap
            .as_ref()
            .expect("individual refreshes")
            .sample(&mut self.rng)
    }

    /// A router sent a request to `dyno` at `now`. Returns when the board's event must be
    /// scheduled, if this change needs one (the first change waiting to be shown, `delayed`).
    #[inline]
    pub fn sent(&mut self, dyno: usize, now: f64) -> Option<f64> {
        self.truth[dyno] += 1;
        self.changed(dyno, now, true)
    }

    /// A router stopped counting a request at `dyno` at `now` (answered, refused or let go);
    /// as [`Self::sent`].
    #[inline]
    pub fn done(&mut self, dyno: usize, now: f64) -> Option<f64> {
        debug_assert!(self.truth[dyno] > 0, "a request done at an idle dyno");
        self.truth[dyno] -= 1;
        self.changed(dyno, now, false)
    }

    #[inline]
    fn changed(&mut self, dyno: usize, now: f64, up: bool) -> Option<f64> {
        match self.update {
            Update::Periodic => {
                if !self.marked[dyno] {
                    self.marked[dyno] = true;
                    self.changed.push(dyno as u32);
                }
                None
            }
            Update::Delayed => {
                let due = now + self.interval;
                let first = self.pending.is_empty();
                self.pending.push_back(Change {
                    due,
                    dyno: dyno as u32,
                    up,
                });
                first.then_some(due)
            }
            Update::Individual | Update::Exact => None,
        }
    }

    /// The board's event at `now`: a refresh (`periodic`: every entry; `individual`: one
    /// slot's), or the changes now `interval` old shown (`delayed`). Returns when the next
    /// event is due, if there is one.
    pub fn due(&mut self, now: f64) -> Option<f64> {
        match self.update {
            Update::Periodic => {
                for &d in &self.changed {
                    let d = d as usize;
                    self.marked[d] = false;
                    self.shown.set(d, self.truth[d]);
                }
                self.changed.clear();
                self.refreshes += 1;
                // From the count, not by adding up intervals: no drift over long runs.
                Some((self.refreshes + 1) as f64 * self.interval)
            }
            Update::Delayed => {
                while let Some(c) = self.pending.front().copied() {
                    if c.due > now {
                        break;
                    }
                    self.pending.pop_front();
                    if c.up {
                        self.shown.increment(c.dyno as usize);
                    } else {
                        self.shown.decrement(c.dyno as usize);
                    }
                }
                self.pending.front().map(|c| c.due)
            }
            Update::Individual => {
                let d = self.rng.random_range(0..self.truth.len());
                self.shown.set(d, self.truth[d]);
                Some(now + self.next_gap())
            }
            Update::Exact => None,
        }
    }

    /// `dyno` is up: it joins the board. Under `periodic` and `individual` it shows its true
    /// load as it registers (0 for a fresh dyno: the requests of one stopped in its slot were
    /// let go when it stopped); under `delayed` its load `interval` ago, as every entry.
    pub fn bring_up(&mut self, dyno: usize) {
        if self.update != Update::Delayed {
            self.shown.set(dyno, self.truth[dyno]);
        }
        self.shown.unpark(dyno);
    }

    /// `dyno` is down: it leaves the board (no policy picks it); its counts go on.
    pub fn take_down(&mut self, dyno: usize) {
        self.shown.park(dyno);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn board(update: Update, interval: f64, slots: usize) -> Board {
        Board::new(
            View { update, interval },
            slots,
            slots,
            Some(Ties::Random),
            SimRng::seed_from_u64(3),
        )
        .unwrap()
    }

    fn shown(b: &Board) -> Vec<u32> {
        (0..b.truth.len()).map(|d| b.shown().in_flight(d)).collect()
    }

    fn view(update: Option<&str>, interval: Option<f64>) -> Result<View> {
        View::build(Some(&ViewSpec {
            update: update.map(str::to_string),
            interval: interval.map(Duration),
        }))
    }

    #[test]
    fn the_spec_is_checked_with_one_line_naming_the_key() {
        assert_eq!(View::build(None).unwrap(), View::EXACT);
        assert_eq!(view(None, None).unwrap(), View::EXACT);
        assert_eq!(
            view(Some("periodic"), Some(2.0)).unwrap(),
            View {
                update: Update::Periodic,
                interval: 2.0
            }
        );
        let message = |r: Result<View>| r.unwrap_err().to_string();
        let e = message(view(Some("stale"), Some(2.0)));
        assert!(
            e.starts_with("router.view.update: unknown update \"stale\""),
            "{e}"
        );
        let e = message(view(None, Some(2.0)));
        assert!(e.starts_with("router.view.update: missing"), "{e}");
        for update in ["periodic", "delayed", "individual"] {
            let e = message(view(Some(update), None));
            assert!(e.starts_with("router.view.interval: missing"), "{e}");
            assert!(e.contains(update), "{e}");
            let e = message(view(Some(update), Some(0.0)));
            assert!(
                e.starts_with("router.view.interval: must be a positive"),
                "{e}"
            );
            let e = message(view(Some(update), Some(-1.0)));
            assert!(e.starts_with("router.view.interval:"), "{e}");
        }
        let e = message(view(Some("exact"), Some(1.0)));
        assert!(e.starts_with("router.view.interval: exact"), "{e}");
        for e in [
            message(view(Some("stale"), None)),
            message(view(Some("delayed"), None)),
        ] {
            assert!(!e.contains('\n'), "{e}");
        }
    }

    /// A periodic board shows the true loads of its last refresh, and nothing in between: a
    /// router's own sends since then are not on it.
    #[test]
    fn a_periodic_board_shows_the_last_refresh() {
        let mut b = board(Update::Periodic, 2.0, 3);
        assert_eq!(b.first_event(), Some(2.0));
        assert_eq!(b.sent(0, 0.5), None);
        b.sent(0, 0.7);
        b.sent(2, 1.0);
        assert_eq!(shown(&b), [0, 0, 0]);
        assert_eq!(b.due(2.0), Some(4.0));
        assert_eq!(shown(&b), [2, 0, 1]);
        b.done(0, 2.5);
        b.sent(1, 3.0);
        assert_eq!(shown(&b), [2, 0, 1]);
        assert_eq!(b.shown().min_load(), 0);
        assert_eq!(b.due(4.0), Some(6.0));
        assert_eq!(shown(&b), [1, 1, 1]);
        assert_eq!(b.shown().min_load(), 1);
    }

    /// Every entry of a delayed board is the true load exactly `interval` earlier: a random
    /// run of sends and answers, with the board's events run when it asks for them, checked
    /// against the true loads recorded at each change.
    #[test]
    fn a_delayed_board_shows_the_true_loads_interval_earlier() {
        let (slots, interval) = (5, 0.75);
        let mut b = board(Update::Delayed, interval, slots);
        assert_eq!(b.first_event(), None);
        let mut rng = SimRng::seed_from_u64(17);
        // The true loads after each change, with its time.
        let mut history: Vec<(f64, Vec<u32>)> = vec![(0.0, vec![0; slots])];
        let mut next_event: Option<f64> = None;
        let mut now = 0.0;
        for _ in 0..4000 {
            now += rng.random::<f64>() * 0.1;
            // The board's events due by now, in time order.
            while let Some(at) = next_event.filter(|&at| at <= now) {
                next_event = b.due(at);
                let then = at - interval;
                let truth = &history
                    .iter()
                    .rev()
                    .find(|(t, _)| *t <= then + 1e-9)
                    .unwrap()
                    .1;
                assert_eq!(&shown(&b), truth, "at {at}: the loads of {then}");
            }
            let d = rng.random_range(0..slots);
            let at_board = if b.true_load(d) > 0 && rng.random::<bool>() {
                b.done(d, now)
            } else {
                b.sent(d, now)
            };
            if let Some(at) = at_board {
                assert!(next_event.is_none(), "one pending event at a time");
                assert_eq!(at, now + interval);
                next_event = Some(at);
            }
            history.push((now, (0..slots).map(|d| b.true_load(d)).collect()));
            // Never more pending changes than those of the last interval.
            let recent = history.iter().filter(|(t, _)| *t > now - interval).count();
            assert!(b.pending.len() <= recent);
        }
    }

    /// Individual refreshes: each slot's entry is its true load at its own last refresh;
    /// refreshes come at rate slots / interval in all, spread evenly over the slots.
    #[test]
    fn individual_refreshes_are_per_slot_at_the_given_rate() {
        let (slots, interval) = (4, 2.0);
        let mut b = board(Update::Individual, interval, slots);
        let mut at = b.first_event().unwrap();
        for d in 0..slots {
            for _ in 0..=d {
                b.sent(d, 0.0);
            }
        }
        let mut refreshed = 0;
        let n = 20_000;
        for _ in 0..n {
            let before = shown(&b);
            at = b.due(at).unwrap();
            let after = shown(&b);
            let moved: Vec<usize> = (0..slots).filter(|&d| before[d] != after[d]).collect();
            assert!(moved.len() <= 1);
            for &d in &moved {
                assert_eq!(after[d], b.true_load(d));
            }
            refreshed += moved.len();
        }
        assert_eq!(shown(&b), [1, 2, 3, 4]);
        assert_eq!(
            refreshed, slots,
            "each entry refreshed once to its (constant) load"
        );
        // n + 1 gaps of rate slots / interval: their sum has mean (n + 1)·interval/slots and
        // standard deviation √(n + 1)·interval/slots; 5 of those is a false alarm once in
        // 3.5 million.
        let gaps = (n + 1) as f64;
        let (mean, sd) = (
            gaps * interval / slots as f64,
            gaps.sqrt() * interval / slots as f64,
        );
        assert!((at - mean).abs() < 5.0 * sd, "{at} vs {mean} ± {sd}");
    }

    /// A dyno going down leaves the ranking; coming up it shows its true load (periodic).
    #[test]
    fn dynos_leave_and_join_the_board() {
        let mut b = board(Update::Periodic, 1.0, 3);
        b.sent(0, 0.1);
        b.sent(1, 0.1);
        b.due(1.0);
        b.take_down(2);
        assert_eq!(b.shown().min_load(), 1, "the idle dyno is down");
        b.done(1, 1.5);
        b.bring_up(2);
        assert_eq!(b.shown().min_load(), 0);
        assert_eq!(
            shown(&b),
            [1, 1, 0],
            "dyno 1's answer waits for the refresh"
        );
    }
}
