//! Aperture (`router.aperture = k`, Finagle's random aperture): each router sends requests to
//! a subset of k dynos only, whatever its policy, which then picks among them alone (its
//! random draws, and for a ranking policy its ranking, range over the subset).
//!
//! Each router draws, at the start and from the aperture's own random stream, an order of
//! the dyno slots (a uniform random permutation); its subset is the first k dynos up in that
//! order. In a fixed fleet that is a uniform random k of the n dynos, drawn independently by
//! each router, as Finagle's random aperture. When dynos come and go (autoscaling, restarts,
//! deploys) the subset keeps k dynos up: a member going down is replaced by the next dyno up
//! in the router's order, and a dyno coming up earlier in the order than the last member
//! takes that member's place. With fewer than k dynos up, the subset is every dyno up, so a
//! router never lacks a dyno while one is up.
//!
//! The router's [`LoadIndex`] ranks its subset alone: the dynos outside it are parked there
//! (see [`LoadIndex::park`]), as the dynos down are.

use crate::error::Result;
use crate::in_flight::LoadIndex;
use crate::rng::SimRng;
use crate::up_set::UpSet;
use rand::seq::SliceRandom;

pub(super) struct Aperture {
    k: usize,
    subsets: Vec<Subset>,
}

struct Subset {
    /// The dyno slots in this router's order.
    order: Vec<u32>,
    /// Each slot's place in `order`.
    place: Vec<u32>,
    /// The subset: the dynos up among `order[..frontier]`, at most k of them. While fewer
    /// than k dynos are up, `frontier` is every slot; otherwise `order[frontier - 1]` is the
    /// last member.
    members: UpSet,
    frontier: usize,
}

impl Aperture {
    /// Subsets of `k` dynos for `loads.len()` routers, of the dynos in `up`; parks the dynos
    /// outside each router's subset in its index.
    pub fn new(k: usize, up: &UpSet, loads: &mut [LoadIndex], rng: &mut SimRng) -> Result<Self> {
        let slots = up.slots();
        let mut subsets = Vec::with_capacity(loads.len());
        for index in loads.iter_mut() {
            let mut order = crate::alloc::filled(slots, 0u32)?;
            for (i, d) in order.iter_mut().enumerate() {
                *d = i as u32;
            }
            order.shuffle(rng);
            let mut place = crate::alloc::filled(slots, 0u32)?;
            for (i, &d) in order.iter().enumerate() {
                place[d as usize] = i as u32;
            }
            let mut subset = Subset {
                order,
                place,
                members: UpSet::new(slots, 0)?,
                frontier: 0,
            };
            // Every dyno out of the ranking, then the members back in it.
            for d in up.iter() {
                index.park(d);
            }
            subset.fill(k, up, index);
            subsets.push(subset);
        }
        Ok(Aperture { k, subsets })
    }

    /// The dynos router `router` may send requests to.
    #[inline]
    pub fn members(&self, router: usize) -> &UpSet {
        &self.subsets[router].members
    }

    /// `dyno` is up (`up` holds it already): it joins the subsets it falls in. The members
    /// that leave a subset for it go into `moved` as (router, dyno), if given.
    pub fn bring_up(
        &mut self,
        dyno: usize,
        loads: &mut [LoadIndex],
        mut moved: Option<&mut Vec<(usize, usize)>>,
    ) {
        for (router, (subset, index)) in self.subsets.iter_mut().zip(loads).enumerate() {
            if subset.place[dyno] as usize >= subset.frontier {
                continue;
            }
            subset.members.insert(dyno);
            index.unpark(dyno);
            if subset.members.len() > self.k {
                // The last member leaves: `dyno`, down until now, was not it.
                let last = subset.order[subset.frontier - 1] as usize;
                subset.members.remove(last);
                index.park(last);
                if let Some(moved) = moved.as_deref_mut() {
                    moved.push((router, last));
                }
                subset.frontier -= 1;
                while subset.frontier > 0
                    && !subset
                        .members
                        .contains(subset.order[subset.frontier - 1] as usize)
                {
                    subset.frontier -= 1;
                }
            }
        }
    }

    /// `dyno` is down (`up` no longer holds it): it leaves the subsets it was in, each taking
    /// the next dyno up in its router's order. The dynos that join a subset for it go into
    /// `moved` as (router, dyno), if given.
    pub fn take_down(
        &mut self,
        dyno: usize,
        up: &UpSet,
        loads: &mut [LoadIndex],
        mut moved: Option<&mut Vec<(usize, usize)>>,
    ) {
        for (router, (subset, index)) in self.subsets.iter_mut().zip(loads).enumerate() {
            if subset.members.contains(dyno) {
                subset.members.remove(dyno);
                index.park(dyno);
                let before = subset.frontier;
                subset.fill(self.k, up, index);
                if let Some(moved) = moved.as_deref_mut() {
                    for &d in &subset.order[before..subset.frontier] {
                        if subset.members.contains(d as usize) {
                            moved.push((router, d as usize));
                        }
                    }
                }
            }
        }
    }
}

impl Subset {
    /// Takes the next dynos up in the order until the subset has `k` (or every slot is seen).
    fn fill(&mut self, k: usize, up: &UpSet, index: &mut LoadIndex) {
        while self.members.len() < k && self.frontier < self.order.len() {
            let d = self.order[self.frontier] as usize;
            self.frontier += 1;
            if up.contains(d) {
                // Up outside the subset until now: parked.
                self.members.insert(d);
                index.unpark(d);
            }
        }
    }
}
