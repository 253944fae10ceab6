//! One router's view of the dynos: how many requests it has in flight on each (sent by this
//! router and not yet answered, whether in service or waiting at the dyno), bucketed by count
//! so that "a least-loaded dyno, ties broken at random" costs O(1). The buckets are kept only
//! for policies that rank dynos by load; the others pay only for the counts.

use crate::rng::SimRng;
use rand::Rng;

#[derive(Debug, Clone)]
pub struct LoadIndex {
    in_flight: Vec<u32>,
    /// buckets[c] holds the dynos with c requests in flight, in no particular order.
    buckets: Vec<Vec<u32>>,
    /// Position of each dyno within its bucket.
    position: Vec<u32>,
    min: u32,
    ranked: bool,
}

impl LoadIndex {
    /// `ranked`: keep the buckets that [`Self::min_load`] and [`Self::random_least_loaded`]
    /// need.
    pub fn new(dynos: usize, ranked: bool) -> Self {
        LoadIndex {
            in_flight: vec![0; dynos],
            buckets: if ranked {
                vec![(0..dynos as u32).collect()]
            } else {
                Vec::new()
            },
            position: if ranked {
                (0..dynos as u32).collect()
            } else {
                Vec::new()
            },
            min: 0,
            ranked,
        }
    }

    #[inline]
    pub fn dynos(&self) -> usize {
        self.in_flight.len()
    }

    #[inline]
    pub fn in_flight(&self, dyno: usize) -> u32 {
        self.in_flight[dyno]
    }

    /// The smallest in-flight count over all dynos (ranked indexes only).
    #[inline]
    pub fn min_load(&self) -> u32 {
        debug_assert!(self.ranked, "min_load needs a ranked index");
        self.min
    }

    /// A dyno with the smallest in-flight count, chosen uniformly among ties.
    #[inline]
    pub fn random_least_loaded(&self, rng: &mut SimRng) -> usize {
        let bucket = &self.buckets[self.min as usize];
        let pick = if bucket.len() == 1 {
            0
        } else {
            rng.random_range(0..bucket.len())
        };
        bucket[pick] as usize
    }

    #[inline]
    fn take(&mut self, dyno: usize) {
        let count = self.in_flight[dyno] as usize;
        let at = self.position[dyno] as usize;
        let bucket = &mut self.buckets[count];
        bucket.swap_remove(at);
        if let Some(&moved) = bucket.get(at) {
            self.position[moved as usize] = at as u32;
        }
    }

    #[inline]
    fn put(&mut self, dyno: usize, count: u32) {
        if self.buckets.len() <= count as usize {
            self.buckets.resize_with(count as usize + 1, Vec::new);
        }
        let bucket = &mut self.buckets[count as usize];
        self.position[dyno] = bucket.len() as u32;
        bucket.push(dyno as u32);
        self.in_flight[dyno] = count;
    }

    #[inline]
    pub fn increment(&mut self, dyno: usize) {
        let count = self.in_flight[dyno];
        if !self.ranked {
            self.in_flight[dyno] = count + 1;
            return;
        }
        self.take(dyno);
        self.put(dyno, count + 1);
        if count == self.min && self.buckets[count as usize].is_empty() {
            self.min += 1;
        }
    }

    #[inline]
    pub fn decrement(&mut self, dyno: usize) {
        let count = self.in_flight[dyno];
        debug_assert!(count > 0, "decrement of an idle dyno");
        if !self.ranked {
            self.in_flight[dyno] = count - 1;
            return;
        }
        self.take(dyno);
        self.put(dyno, count - 1);
        self.min = self.min.min(count - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn least_loaded_tracks_counts() {
        let mut rng = SimRng::seed_from_u64(7);
        let mut index = LoadIndex::new(4, true);
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
}
