//! One router's view of the dynos: how many requests it has in flight on each (sent by this
//! router and not yet answered, whether in service or waiting at the dyno), bucketed by count
//! so that "a least-loaded dyno" costs O(1). The buckets are kept only for policies that rank
//! dynos by load; the others pay only for the counts. Ties between least-loaded dynos are
//! broken at random ([`Ties::Random`]: a bucket is a set with O(1) random pick) or in favour of
//! the dyno that has been at that load longest ([`Ties::Oldest`]: a bucket is a FIFO list).

use crate::alloc::filled;
use crate::error::Result;
use crate::rng::SimRng;
use rand::Rng;

/// How a ranked index breaks ties between least-loaded dynos.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ties {
    Random,
    Oldest,
}

const NIL: u32 = u32::MAX;
/// In [`PREV`] of a dyno out of the ranking ([`LoadIndex::park`]), with oldest-first ties.
const PARKED: u32 = u32::MAX - 1;
/// A list's ends: its first and last dyno.
const HEAD: usize = 0;
const TAIL: usize = 1;
/// A dyno's links: the dynos before and after it in its list.
const PREV: usize = 0;
const NEXT: usize = 1;

#[derive(Debug, Clone)]
enum Buckets {
    /// Counts only.
    None,
    /// `sets[c]` holds the dynos with c requests in flight, in no particular order;
    /// `position[d]` is dyno d's place in its set.
    Random {
        sets: Vec<Vec<u32>>,
        position: Vec<u32>,
    },
    /// `ends[c]`, its [`HEAD`] and [`TAIL`], link the dynos with c requests in flight in the
    /// order they reached that count (`links[d]`, dyno d's [`PREV`] and [`NEXT`]; [`NIL`] ends
    /// a list). Each pair side by side: one bounds check and one line for both.
    Oldest {
        ends: Vec<[u32; 2]>,
        links: Vec<[u32; 2]>,
    },
}

impl Buckets {
    /// Takes `dyno` out of bucket `from`; false (and nothing done) when it is parked.
    #[inline(always)]
    fn take(&mut self, dyno: usize, from: usize) -> bool {
        match self {
            Buckets::None => true,
            Buckets::Random { sets, position } => {
                let at = position[dyno];
                if at == NIL {
                    return false;
                }
                sets[from].swap_remove(at as usize);
                if let Some(&moved) = sets[from].get(at as usize) {
                    position[moved as usize] = at;
                }
                true
            }
            Buckets::Oldest { ends, links } => {
                let [p, n] = links[dyno];
                if p == PARKED {
                    return false;
                }
                match p {
                    NIL => ends[from][HEAD] = n,
                    p => links[p as usize][NEXT] = n,
                }
                match n {
                    NIL => ends[from][TAIL] = p,
                    n => links[n as usize][PREV] = p,
                }
                true
            }
        }
    }

    /// Puts `dyno` last into bucket `to`.
    #[inline(always)]
    fn put(&mut self, dyno: usize, to: usize) {
        match self {
            Buckets::None => {}
            Buckets::Random { sets, position } => {
                if sets.len() <= to {
                    sets.resize_with(to + 1, Vec::new);
                }
                position[dyno] = sets[to].len() as u32;
                sets[to].push(dyno as u32);
            }
            Buckets::Oldest { ends, links } => {
                if ends.len() <= to {
                    ends.resize(to + 1, [NIL, NIL]);
                }
                let last = ends[to][TAIL];
                links[dyno] = [last, NIL];
                match last {
                    NIL => ends[to][HEAD] = dyno as u32,
                    last => links[last as usize][NEXT] = dyno as u32,
                }
                ends[to][TAIL] = dyno as u32;
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct LoadIndex {
    in_flight: Vec<u32>,
    /// The sum of `in_flight`: this router's requests on every dyno, up or not (HAProxy's
    /// `served` of a backend, which `bounded_hash` reads).
    total: u64,
    buckets: Buckets,
    min: u32,
}

impl LoadIndex {
    /// `ranking`: keep the buckets that [`Self::min_load`] and the least-loaded picks need,
    /// breaking ties this way.
    /// Fails, rather than aborting, when the memory for the index cannot be had.
    pub fn new(dynos: usize, ranking: Option<Ties>) -> Result<Self> {
        // The dynos numbered from `from`, NIL past the last: each list below is one of these.
        let numbered = |from: i64| -> Result<Vec<u32>> {
            let mut v = filled(dynos, NIL)?;
            for (d, x) in v.iter_mut().enumerate() {
                let n = d as i64 + from;
                if (0..dynos as i64).contains(&n) {
                    *x = n as u32;
                }
            }
            Ok(v)
        };
        let buckets = match ranking {
            None => Buckets::None,
            Some(Ties::Random) => Buckets::Random {
                sets: vec![numbered(0)?],
                position: numbered(0)?,
            },
            Some(Ties::Oldest) => Buckets::Oldest {
                ends: vec![if dynos > 0 {
                    [0, dynos as u32 - 1]
                } else {
                    [NIL, NIL]
                }],
                links: {
                    // The dynos in order: each linked to the one before and after it.
                    let mut links = filled(dynos, [NIL, NIL])?;
                    for (d, link) in links.iter_mut().enumerate() {
                        if d > 0 {
                            link[PREV] = d as u32 - 1;
                        }
                        if d + 1 < dynos {
                            link[NEXT] = d as u32 + 1;
                        }
                    }
                    links
                },
            },
        };
        Ok(LoadIndex {
            in_flight: filled(dynos, 0)?,
            total: 0,
            buckets,
            min: 0,
        })
    }

    #[inline]
    pub fn dynos(&self) -> usize {
        self.in_flight.len()
    }

    #[inline]
    pub fn in_flight(&self, dyno: usize) -> u32 {
        self.in_flight[dyno]
    }

    /// This router's requests in flight on all the dynos together.
    #[inline]
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Asks for dyno `dyno`'s count's line (see [`crate::alloc::prefetch`]).
    #[inline]
    pub fn prefetch(&self, dyno: usize) {
        crate::alloc::prefetch(&self.in_flight[dyno]);
    }

    /// The smallest in-flight count over all dynos (ranked indexes only).
    #[inline]
    pub fn min_load(&self) -> u32 {
        debug_assert!(
            !matches!(self.buckets, Buckets::None),
            "min_load needs a ranked index"
        );
        self.min
    }

    /// A dyno with the smallest in-flight count, chosen uniformly among ties
    /// ([`Ties::Random`] indexes only).
    #[inline]
    pub fn random_least_loaded(&self, rng: &mut SimRng) -> usize {
        let Buckets::Random { sets, .. } = &self.buckets else {
            unreachable!("random_least_loaded needs an index with random ties")
        };
        let bucket = &sets[self.min as usize];
        let pick = if bucket.len() == 1 {
            0
        } else {
            rng.random_range(0..bucket.len())
        };
        bucket[pick] as usize
    }

    /// The dyno with the smallest in-flight count that has had it longest ([`Ties::Oldest`]
    /// indexes only).
    #[inline]
    pub fn oldest_least_loaded(&self) -> usize {
        let Buckets::Oldest { ends, .. } = &self.buckets else {
            unreachable!("oldest_least_loaded needs an index with oldest-first ties")
        };
        ends[self.min as usize][HEAD] as usize
    }

    fn bucket_is_empty(&self, count: u32) -> bool {
        match &self.buckets {
            Buckets::None => true,
            Buckets::Random { sets, .. } => sets.get(count as usize).map_or(true, |s| s.is_empty()),
            Buckets::Oldest { ends, .. } => {
                ends.get(count as usize).map_or(true, |e| e[HEAD] == NIL)
            }
        }
    }

    /// Moves `dyno` from its bucket to the one for `count`; false when it is out of the
    /// ranking (parked), whose count alone changes.
    #[inline]
    fn shift(&mut self, dyno: usize, count: u32) -> bool {
        let from = std::mem::replace(&mut self.in_flight[dyno], count);
        if !self.buckets.take(dyno, from as usize) {
            return false;
        }
        self.buckets.put(dyno, count as usize);
        true
    }

    #[inline]
    pub fn increment(&mut self, dyno: usize) {
        let count = self.in_flight[dyno];
        self.total += 1;
        if matches!(self.buckets, Buckets::None) {
            self.in_flight[dyno] = count + 1;
            return;
        }
        if self.shift(dyno, count + 1) && count == self.min && self.bucket_is_empty(count) {
            self.min += 1;
        }
    }

    #[inline]
    pub fn decrement(&mut self, dyno: usize) {
        let count = self.in_flight[dyno];
        debug_assert!(count > 0, "decrement of an idle dyno");
        self.total -= 1;
        if matches!(self.buckets, Buckets::None) {
            self.in_flight[dyno] = count - 1;
            return;
        }
        if self.shift(dyno, count - 1) {
            self.min = self.min.min(count - 1);
        }
    }

    /// Sets `dyno`'s count to `count` at once: a board of late loads shown anew
    /// ([`crate::view`]), whose entries jump from one refresh to the next. A ranked dyno goes
    /// last into its new bucket, as if it had just reached that count.
    pub fn set(&mut self, dyno: usize, count: u32) {
        let from = self.in_flight[dyno];
        if from == count {
            return;
        }
        self.total = self.total + u64::from(count) - u64::from(from);
        if matches!(self.buckets, Buckets::None) {
            self.in_flight[dyno] = count;
            return;
        }
        if !self.shift(dyno, count) {
            return;
        }
        if count < self.min {
            self.min = count;
        } else if from == self.min && self.bucket_is_empty(from) {
            // The dyno left the least-loaded bucket empty; the next non-empty one is at most
            // its own new count.
            self.min = (from..=count)
                .find(|&c| !self.bucket_is_empty(c))
                .expect("the dyno's own bucket");
        }
    }

    /// Takes `dyno` out of the ranking: it is no longer up, and [`Self::min_load`] and the
    /// least-loaded picks skip it; its count is still kept. With no dyno left in the ranking
    /// the minimum is `u32::MAX`.
    pub fn park(&mut self, dyno: usize) {
        let count = self.in_flight[dyno] as usize;
        if matches!(self.buckets, Buckets::None) {
            return;
        }
        let ranked = self.buckets.take(dyno, count);
        debug_assert!(ranked, "dyno {dyno} parked twice");
        match &mut self.buckets {
            Buckets::Random { position, .. } => position[dyno] = NIL,
            Buckets::Oldest { links, .. } => links[dyno][PREV] = PARKED,
            Buckets::None => {}
        }
        if count as u32 == self.min && self.bucket_is_empty(self.min) {
            let buckets = match &self.buckets {
                Buckets::Random { sets, .. } => sets.len(),
                Buckets::Oldest { ends, .. } => ends.len(),
                Buckets::None => 0,
            } as u32;
            self.min = (self.min..buckets)
                .find(|&c| !self.bucket_is_empty(c))
                .unwrap_or(u32::MAX);
        }
    }

    /// Puts `dyno` back in the ranking, at its count (the last of its bucket to reach it).
    pub fn unpark(&mut self, dyno: usize) {
        let count = self.in_flight[dyno];
        debug_assert!(
            match &self.buckets {
                Buckets::Random { position, .. } => position[dyno] == NIL,
                Buckets::Oldest { links, .. } => links[dyno][PREV] == PARKED,
                Buckets::None => true,
            },
            "dyno {dyno} is ranked already"
        );
        if matches!(self.buckets, Buckets::None) {
            return;
        }
        self.buckets.put(dyno, count as usize);
        self.min = self.min.min(count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn least_loaded_tracks_counts() {
        let mut rng = SimRng::seed_from_u64(7);
        let mut index = LoadIndex::new(4, Some(Ties::Random)).unwrap();
        for d in [0, 1, 2, 0, 1] {
            index.increment(d);
        }
        assert_eq!(index.min_load(), 0);
        assert_eq!(index.random_least_loaded(&mut rng), 3);
        index.increment(3);
        assert_eq!(index.min_load(), 1);
        let pick = index.random_least_loaded(&mut rng);
        assert!(pick == 2 || pick == 3);
        index.decrement(0);
        index.decrement(0);
        assert_eq!(index.min_load(), 0);
        assert_eq!(index.random_least_loaded(&mut rng), 0);
        assert_eq!(
            (0..4).map(|d| index.in_flight(d)).collect::<Vec<_>>(),
            vec![0, 2, 1, 1]
        );
    }

    /// Parked dynos are never picked, keep their counts, and come back at them; the
    /// minimum is over the ranked dynos alone. Checked against a plain scan, for both ties.
    #[test]
    fn parked_dynos_are_skipped_and_come_back() {
        use rand::Rng;
        for ties in [Ties::Random, Ties::Oldest] {
            let mut rng = SimRng::seed_from_u64(5);
            let n = 6;
            let mut index = LoadIndex::new(n, Some(ties)).unwrap();
            let mut counts = vec![0u32; n];
            let mut parked = vec![false; n];
            for step in 0..5000 {
                let d = rng.random_range(0..n);
                match rng.random_range(0..4) {
                    0 => {
                        if parked[d] {
                            index.unpark(d);
                        } else {
                            index.park(d);
                        }
                        parked[d] = !parked[d];
                    }
                    1 if counts[d] > 0 => {
                        index.decrement(d);
                        counts[d] -= 1;
                    }
                    _ if !parked[d] => {
                        index.increment(d);
                        counts[d] += 1;
                    }
                    _ => {}
                }
                let ranked: Vec<usize> = (0..n).filter(|&d| !parked[d]).collect();
                let min = ranked.iter().map(|&d| counts[d]).min();
                assert_eq!(index.min_load(), min.unwrap_or(u32::MAX), "step {step}");
                if let Some(min) = min {
                    let pick = match ties {
                        Ties::Random => index.random_least_loaded(&mut rng),
                        Ties::Oldest => index.oldest_least_loaded(),
                    };
                    assert!(!parked[pick] && counts[pick] == min, "step {step}");
                }
                for (d, &count) in counts.iter().enumerate() {
                    assert_eq!(index.in_flight(d), count);
                }
            }
        }
    }

    /// Counts set at once (a board's refresh), mixed with steps and parking, keep the minimum
    /// and the least-loaded picks of a plain scan, for both ties.
    #[test]
    fn counts_set_at_once_keep_the_ranking() {
        use rand::Rng;
        for ties in [Ties::Random, Ties::Oldest] {
            let mut rng = SimRng::seed_from_u64(9);
            let n = 7;
            let mut index = LoadIndex::new(n, Some(ties)).unwrap();
            let mut counts = vec![0u32; n];
            let mut parked = vec![false; n];
            for step in 0..5000 {
                let d = rng.random_range(0..n);
                match rng.random_range(0..5) {
                    0 => {
                        if parked[d] {
                            index.unpark(d);
                        } else {
                            index.park(d);
                        }
                        parked[d] = !parked[d];
                    }
                    1 | 2 => {
                        let count = rng.random_range(0..6);
                        index.set(d, count);
                        counts[d] = count;
                    }
                    3 if counts[d] > 0 => {
                        index.decrement(d);
                        counts[d] -= 1;
                    }
                    _ => {
                        index.increment(d);
                        counts[d] += 1;
                    }
                }
                let min = (0..n).filter(|&d| !parked[d]).map(|d| counts[d]).min();
                assert_eq!(index.min_load(), min.unwrap_or(u32::MAX), "step {step}");
                if let Some(min) = min {
                    let pick = match ties {
                        Ties::Random => index.random_least_loaded(&mut rng),
                        Ties::Oldest => index.oldest_least_loaded(),
                    };
                    assert!(!parked[pick] && counts[pick] == min, "step {step}");
                }
                for (d, &count) in counts.iter().enumerate() {
                    assert_eq!(index.in_flight(d), count);
                }
            }
        }
    }

    #[test]
    fn oldest_ties_go_to_the_longest_at_the_least_load() {
        let mut index = LoadIndex::new(4, Some(Ties::Oldest)).unwrap();
        // Initially every dyno is idle; the lowest number counts as idle longest.
        assert_eq!(index.oldest_least_loaded(), 0);
        for d in [0, 1, 2, 3] {
            index.increment(d);
        }
        assert_eq!(index.min_load(), 1);
        // Dynos 2, then 0, then 3 finish: 2 has been idle longest.
        index.decrement(2);
        index.decrement(0);
        index.decrement(3);
        assert_eq!((index.min_load(), index.oldest_least_loaded()), (0, 2));
        index.increment(2);
        assert_eq!(index.oldest_least_loaded(), 0);
        // A dyno taken from the middle of a list keeps the others in order.
        index.increment(0);
        index.decrement(1);
        assert_eq!(index.oldest_least_loaded(), 3);
        index.increment(3);
        assert_eq!(index.oldest_least_loaded(), 1);
        index.increment(1);
        assert_eq!(index.min_load(), 1);
        // At load 1 the order is that in which the dynos reached it: 2, 0, 3, 1.
        assert_eq!(index.oldest_least_loaded(), 2);
        assert_eq!(
            (0..4).map(|d| index.in_flight(d)).collect::<Vec<_>>(),
            vec![1, 1, 1, 1]
        );
    }
}
