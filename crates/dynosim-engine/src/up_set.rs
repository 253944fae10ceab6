//! The dynos a router may send a request to: those up, out of every dyno slot the run has.
//! Every routing policy picks among these alone, whatever it reads ([`crate::policy`]): a dyno
//! booting, draining, stopped or restarting is not in the set.
//!
//! The set is a dense list of the up dynos and each dyno's place in it, so that a uniform
//! draw among the up dynos is one draw and one read, and a dyno joins or leaves in O(1). While
//! every slot is up (a fixed fleet that never restarts a dyno), the i-th up dyno is dyno i,
//! whatever the list's order: the draws, and so the runs, are those of a fleet without a
//! lifecycle.

use crate::alloc::filled;
use crate::error::Result;
use crate::rng::SimRng;
use rand::distr::{Distribution, Uniform};

const OUT: u32 = u32::MAX;

/// Draws one of `n` uniformly at random (a place among the up dynos, see [`UpSet`]). Set up
/// once per size: a draw is then one multiplication and a comparison, where `random_range`
/// sets the range up on every call.
#[derive(Debug, Clone, Copy)]
pub struct DynoDraw(Uniform<usize>);

impl DynoDraw {
    pub(crate) fn new(dynos: usize) -> Self {
        DynoDraw(Uniform::new(0, dynos.max(1)).expect("0 < dynos"))
    }

    /// A dyno drawn as [`RouterView::random_dyno`] draws it.
    #[inline]
    pub(crate) fn sample(&self, rng: &mut SimRng) -> usize {
        self.0.sample(rng)
    }
}

#[derive(Debug, Clone)]
pub struct UpSet {
    /// The up dynos, in no particular order.
    list: Vec<u32>,
    /// Each slot's place in `list`, or [`OUT`].
    place: Vec<u32>,
    /// A uniform draw of a place in `list`, rebuilt when its length changes.
    draw: DynoDraw,
    /// Bumped whenever a dyno comes up or goes down (see [`Self::version`]).
    version: u64,
}

impl UpSet {
    /// `slots` dyno slots, of which the first `up` are up.
    pub fn new(slots: usize, up: usize) -> Result<UpSet> {
        debug_assert!(up <= slots);
        let mut list = filled(up, 0u32)?;
        for (i, d) in list.iter_mut().enumerate() {
            *d = i as u32;
        }
        let mut place = filled(slots, OUT)?;
        for (i, p) in place.iter_mut().take(up).enumerate() {
            *p = i as u32;
        }
        Ok(UpSet {
            list,
            place,
            draw: DynoDraw::new(up),
            version: 0,
        })
    }

    /// Every one of `slots` dynos up, for good (the direct engine's fleets).
    pub fn all(slots: usize) -> Result<UpSet> {
        UpSet::new(slots, slots)
    }

    /// How many dynos are up.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.list.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Dyno slots, up or not.
    #[inline]
    pub fn slots(&self) -> usize {
        self.place.len()
    }

    #[inline]
    pub fn contains(&self, dyno: usize) -> bool {
        self.place[dyno] != OUT
    }

    /// The dyno's place among the up dynos (the `i` of [`Self::dyno_at`]), None when it is not
    /// up.
    #[inline]
    pub fn place_of(&self, dyno: usize) -> Option<usize> {
        match self.place[dyno] {
            OUT => None,
            at => Some(at as usize),
        }
    }

    /// Changes whenever a dyno comes up or goes down: a policy that keeps its own list of the
    /// up dynos (an EDF schedule) knows from it when to rebuild that list.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The `i`-th up dyno (`i < len`): dyno `i` itself while every slot is up.
    #[inline(always)]
    pub fn dyno_at(&self, i: usize) -> usize {
        if self.list.len() == self.place.len() {
            i
        } else {
            self.list[i] as usize
        }
    }

    /// A place drawn uniformly among the up dynos' (`0..len`).
    #[inline(always)]
    pub fn draw_place(&self, rng: &mut SimRng) -> usize {
        self.draw.sample(rng)
    }

    /// An up dyno drawn uniformly.
    #[inline(always)]
    pub fn draw(&self, rng: &mut SimRng) -> usize {
        self.dyno_at(self.draw.sample(rng))
    }

    /// The up dynos.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.len()).map(|i| self.dyno_at(i))
    }

    /// `dyno` is up from now on.
    pub fn insert(&mut self, dyno: usize) {
        debug_assert!(!self.contains(dyno), "dyno {dyno} is up already");
        self.place[dyno] = self.list.len() as u32;
        self.list.push(dyno as u32);
        self.draw = DynoDraw::new(self.list.len());
        self.version += 1;
    }

    /// `dyno` is no longer up.
    pub fn remove(&mut self, dyno: usize) {
        let at = self.place[dyno];
        debug_assert!(at != OUT, "dyno {dyno} is not up");
        self.list.swap_remove(at as usize);
        if let Some(&moved) = self.list.get(at as usize) {
            self.place[moved as usize] = at;
        }
        self.place[dyno] = OUT;
        self.draw = DynoDraw::new(self.list.len());
        self.version += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn a_full_set_is_the_identity_and_draws_as_before() {
        let set = UpSet::all(7).unwrap();
        let draw = DynoDraw::new(7);
        let (mut a, mut b) = (SimRng::seed_from_u64(3), SimRng::seed_from_u64(3));
        for _ in 0..100 {
            assert_eq!(set.draw(&mut a), draw.sample(&mut b));
        }
        // After a dyno leaves and comes back, the set is full again: the identity again.
        let mut set = set;
        set.remove(2);
        set.insert(2);
        assert_eq!(set.iter().collect::<Vec<_>>(), (0..7).collect::<Vec<_>>());
    }

    #[test]
    fn draws_only_up_dynos_and_each_of_them() {
        let mut set = UpSet::new(10, 10).unwrap();
        for d in [0, 3, 9, 5] {
            set.remove(d);
        }
        set.insert(9);
        let mut rng = SimRng::seed_from_u64(11);
        let mut seen = [0u32; 10];
        for _ in 0..6000 {
            seen[set.draw(&mut rng)] += 1;
        }
        for d in 0..10 {
            assert_eq!(seen[d] > 0, set.contains(d), "dyno {d}: {seen:?}");
        }
        assert_eq!(set.len(), 7);
        let mut up: Vec<usize> = set.iter().collect();
        up.sort();
        assert_eq!(up, vec![1, 2, 4, 6, 7, 8, 9]);
    }
}
