use super::{Knowledge, Route, RouterView, RoutingPolicy};
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use rand::Rng;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// The most draws a request may have.
const MAX_CHOICES: i64 = 100;
/// The largest `active_request_bias`: at 10 a dyno with one request in flight already has a
/// thousandth of an idle one's weight.
const MAX_BIAS: f64 = 10.0;

/// Envoy's `LEAST_REQUEST` load balancer (`least_request_lb.cc`), for hosts of equal weight as
/// dynos are. Each router is one Envoy process, which counts only the requests it sent itself.
///
/// By default, `choice_count` draws *with replacement* among the up dynos, and the one with
/// the fewest of this router's requests in flight wins; a tie keeps the earlier draw
/// (`unweightedHostPickNChoices`). That is `power_of_d` with `distinct = false`.
///
/// With `active_request_bias` set, Envoy's weighted mode: an earliest-deadline-first schedule
/// (`EdfScheduler`) in which a dyno's weight is 1/(active + 1)^bias. The dyno with the
/// earliest deadline is picked, and put back with the deadline `now + 1/weight`, its weight
/// worked out from its load at that moment: a dyno's place reflects its load when it was last
/// picked, not its load now. Bias 0 is plain round robin. When dynos come or go the schedule is
/// rebuilt, every dyno at its current weight, and started as many picks in as a number the
/// router drew once (Envoy's `seed_ % hosts`), so that routers do not all start at one dyno.
/// `choice_count` is not read in this mode, as in Envoy.
#[derive(Debug, Clone)]
pub struct LeastRequest {
    choice_count: u32,
    /// `active_request_bias`; None: the draws of `choice_count`.
    bias: Option<f64>,
    /// The weighted mode's schedule, made at the first request.
    schedule: Option<Schedule>,
}

pub fn build(p: &Params) -> Result<Box<dyn RoutingPolicy>> {
    let bias = match p.get::<f64>("active_request_bias")? {
        None => None,
        Some(b) if b.is_finite() && (0.0..=MAX_BIAS).contains(&b) => Some(b),
        Some(b) => {
            return Err(p.error(
                "active_request_bias",
                format!("must be a number from 0 to {MAX_BIAS}, got {b}"),
            ))
        }
    };
    Ok(Box::new(LeastRequest {
        choice_count: p.whole("choice_count", 2, 1, MAX_CHOICES)?,
        bias,
        schedule: None,
    }))
}

impl RoutingPolicy for LeastRequest {
    fn route(&mut self, view: &RouterView, rng: &mut SimRng) -> Route {
        let Some(bias) = self.bias else {
            let mut best = view.random_dyno(rng);
            for _ in 1..self.choice_count {
                let candidate = view.random_dyno(rng);
                if view.in_flight(candidate) < view.in_flight(best) {
                    best = candidate;
                }
            }
            return Route::To(best);
        };
        let seed = match &self.schedule {
            Some(s) if s.version == view.up_version() => None,
            Some(s) => Some(s.seed),
            None => Some(rng.random::<u64>()),
        };
        if let Some(seed) = seed {
            self.schedule = Some(Schedule::new(view, bias, seed));
        }
        let schedule = self.schedule.as_mut().expect("made above");
        Route::To(schedule.pick_and_add(view, bias))
    }
    fn knowledge(&self) -> Knowledge {
        Knowledge::Some
    }
}

/// One entry of the schedule: a dyno and its deadline; among equal deadlines the one put in
/// first comes first.
#[derive(Debug, Clone, Copy)]
struct Entry {
    deadline: f64,
    order: u64,
    dyno: u32,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed, so that the max-heap gives the earliest deadline, then the earliest put in.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .deadline
            .total_cmp(&self.deadline)
            .then(other.order.cmp(&self.order))
    }
}

/// Envoy's `EdfScheduler` over the up dynos.
#[derive(Debug, Clone)]
struct Schedule {
    heap: BinaryHeap<Entry>,
    /// The deadline of the last pick.
    now: f64,
    /// Entries put in so far, for ties.
    order: u64,
    /// The set of up dynos it was made for ([`RouterView::up_version`]).
    version: u64,
    /// Drawn once: the picks made when the schedule is (re)made, modulo the dynos up.
    seed: u64,
}

impl Schedule {
    fn new(view: &RouterView, bias: f64, seed: u64) -> Schedule {
        let n = view.dynos();
        let mut schedule = Schedule {
            heap: BinaryHeap::with_capacity(n),
            now: 0.0,
            order: 0,
            version: view.up_version(),
            seed,
        };
        for i in 0..n {
            let dyno = view.dyno_at(i);
            schedule.add(dyno, view.in_flight(dyno), bias);
        }
        for _ in 0..seed % n as u64 {
            schedule.pick_and_add(view, bias);
        }
        schedule
    }

    /// Puts `dyno` in with the deadline now + 1/weight, weight = 1/(active + 1)^bias.
    fn add(&mut self, dyno: usize, active: u32, bias: f64) {
        let inverse_weight = if bias == 0.0 {
            1.0
        } else {
            (f64::from(active) + 1.0).powf(bias)
        };
        self.heap.push(Entry {
            deadline: self.now + inverse_weight,
            order: self.order,
            dyno: dyno as u32,
        });
        self.order += 1;
    }

    /// The dyno with the earliest deadline, put back at its load now.
    fn pick_and_add(&mut self, view: &RouterView, bias: f64) -> usize {
        let top = self.heap.pop().expect("a schedule of the up dynos");
        self.now = top.deadline;
        let dyno = top.dyno as usize;
        self.add(dyno, view.in_flight(dyno), bias);
        dyno
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::in_flight::LoadIndex;
    use crate::up_set::UpSet;
    use rand::SeedableRng;

    fn policy(choice_count: u32, bias: Option<f64>) -> LeastRequest {
        LeastRequest {
            choice_count,
            bias,
            schedule: None,
        }
    }

    /// Bias 0 is round robin: over any stretch of picks, whatever the loads, the dynos' counts
    /// differ by at most one, and each pass goes through the dynos in one order.
    #[test]
    fn bias_zero_is_exact_round_robin() {
        let n = 7;
        let mut rng = SimRng::seed_from_u64(3);
        let up = UpSet::all(n).unwrap();
        let mut index = LoadIndex::new(n, None).unwrap();
        let mut p = policy(2, Some(0.0));
        let mut counts = vec![0u64; n];
        let mut first_pass = Vec::new();
        for i in 0..10_007 {
            let Route::To(d) = p.route(&RouterView::indexed(1, &up, &index), &mut rng) else {
                panic!("least_request never holds");
            };
            counts[d] += 1;
            if i < n {
                first_pass.push(d);
            } else {
                assert_eq!(d, first_pass[i % n], "pick {i} breaks the cycle");
            }
            let (max, min) = (counts.iter().max().unwrap(), counts.iter().min().unwrap());
            assert!(max - min <= 1, "pick {i}: {counts:?}");
            // Loads that change at random: bias 0 must not read them.
            index.increment(rng.random_range(0..n));
        }
    }

    /// Bias 1: a pick puts the dyno back 1 + active after the pick's deadline; written out by
    /// hand on three dynos, one of them loaded.
    #[test]
    fn bias_one_follows_the_deadlines() {
        let n = 3;
        let up = UpSet::all(n).unwrap();
        let mut index = LoadIndex::new(n, None).unwrap();
        for _ in 0..2 {
            index.increment(1);
        }
        let view = RouterView::indexed(1, &up, &index);
        // Deadlines at the start: dyno 0 at 1, dyno 1 at 3, dyno 2 at 1 (no pre-picks: seed 0).
        let mut s = Schedule::new(&view, 1.0, 0);
        let picks: Vec<usize> = (0..6).map(|_| s.pick_and_add(&view, 1.0)).collect();
        // 0 (now 1, back at 2), 2 (now 1, back at 2), 0 (now 2, back at 3), 2 (now 2, back
        // at 3), then at 3: dyno 1 (put in before the others' re-adds), 0.
        assert_eq!(picks, vec![0, 2, 0, 2, 1, 0]);
        assert_eq!(s.now, 3.0);
    }

    /// The schedule follows the up dynos: a dyno down is never picked, and one back up is.
    #[test]
    fn the_schedule_follows_the_fleet() {
        let n = 5;
        let mut rng = SimRng::seed_from_u64(9);
        let mut up = UpSet::all(n).unwrap();
        let index = LoadIndex::new(n, None).unwrap();
        let mut p = policy(2, Some(1.0));
        let mut route = |up: &UpSet, rng: &mut SimRng| match p
            .route(&RouterView::indexed(1, up, &index), rng)
        {
            Route::To(d) => d,
            Route::Hold => panic!("least_request never holds"),
        };
        for _ in 0..20 {
            route(&up, &mut rng);
        }
        up.remove(3);
        for _ in 0..40 {
            assert_ne!(route(&up, &mut rng), 3);
        }
        up.insert(3);
        assert!((0..40).any(|_| route(&up, &mut rng) == 3));
    }

    /// The default draws are those of `power_of_d` with `distinct = false`, draw for draw.
    #[test]
    fn two_choices_with_replacement_keep_the_earlier_draw_on_a_tie() {
        let n = 4;
        let up = UpSet::all(n).unwrap();
        let mut index = LoadIndex::new(n, None).unwrap();
        let (mut a, mut b) = (SimRng::seed_from_u64(5), SimRng::seed_from_u64(5));
        // The loads' own changes.
        let mut c = SimRng::seed_from_u64(6);
        let mut p = policy(2, None);
        let mut ties = 0;
        for _ in 0..5000 {
            let view = RouterView::indexed(1, &up, &index);
            let Route::To(got) = p.route(&view, &mut a) else {
                panic!("least_request never holds");
            };
            let (x, y) = (view.random_dyno(&mut b), view.random_dyno(&mut b));
            let want = if view.in_flight(y) < view.in_flight(x) {
                y
            } else {
                x
            };
            if x != y && view.in_flight(x) == view.in_flight(y) {
                ties += 1;
            }
            assert_eq!(got, want);
            index.increment(got);
            let busy: Vec<usize> = (0..n).filter(|&d| index.in_flight(d) > 0).collect();
            if c.random_range(0..3) > 0 {
                index.decrement(busy[c.random_range(0..busy.len())]);
            }
        }
        assert!(ties > 100, "{ties} ties");
    }
}
