//! Processor sharing: the jobs on a set of servers (a dyno's cores, a database's servers)
//! share them, each runnable job getting min(1, servers / jobs) of a server. With an
//! interpreter lock, the jobs are grouped by process and at most one job of a process computes
//! at a time: each process with runnable jobs gets min(1, servers / processes) of a server,
//! split evenly between its jobs (a lock handed round much faster than a CPU phase lasts).
//! A slowdown factor (memory over quota) divides every rate, and a group may have a factor of
//! its own (malloc arena contention).
//!
//! Every job of a group runs at the same rate, so each group keeps a virtual time: the work
//! each of its jobs has done since the group was last empty. A job joining at virtual time V
//! with work w is done when the group's virtual time reaches V + w, its tag.
//!
//! **Two clocks.** The rates have two factors: what each runnable process (without a lock:
//! each job) gets, min(1, servers / runnable) / slowdown, the same for every group; and what
//! a group's job gets of that, 1 / (its jobs with a lock, times its own factor), which
//! changes only when the group does. So the sharing keeps one clock C, advancing at the
//! first factor (the speed), and a group's virtual time moves by (C - C₀) × its share since
//! it was last brought up to date at C₀. A change advances C (one multiply-add) and brings
//! up to date only the group it touches; a group's first job is done when C reaches a point
//! fixed until the group changes (its `due`), and the next completion is the least `due`
//! over the active groups, reached at the clock's speed. No pass over the groups with a
//! division each (what a change cost before: the same rates, rounded differently in the
//! last bits). The next completion is moved (in the event queue, [`crate::kernel`]) only
//! when it moves by more than rounding.
//!
//! **Storage.** A [`Sharing`] is a small header with no allocation of its own: its groups and
//! their jobs live in a [`SharingStore`] shared by many (every dyno's CPU in one store), at
//! places computed from the sharing's number, so that the state of a dyno's CPU is three
//! regions whose addresses are known at once (header, groups, jobs) rather than a chain of
//! pointers to follow (it was five allocations a dyno; with 100,000 dynos each was a cache
//! miss). Group `g` of sharing `k` is `groups[k * G + g]`, and its jobs are
//! `jobs[(k * G + g) * J ..][.. len]` for at most `J` jobs a group (a process's threads). A
//! store of one group may instead have no bound (a resource's jobs): its jobs are then kept
//! in a [`TagIndex`], by tag, rather than in the vector.
//!
//! **A resource's jobs by tag.** A database of thousands of servers holds thousands of
//! queries at once (in a retry storm, one for each of the fleet's workers). Finding the next
//! one done, the ones done at an instant, and a job's place by a pass over them all in the
//! order they joined made every completion cost as much as thousands of jobs (half the run's
//! time in a storm at 1,000 requests a second). The unbounded store keeps them ordered by
//! (tag, order of joining) instead: the first job is the least of that order (the first to
//! join among equal tags, as the pass found it), the jobs done at an instant are a prefix of
//! it (a job is done when its tag less the virtual time is within rounding, which rises with
//! the tag), and they are handed out in the order they joined, as the pass did: the same
//! requests in the same order, each step O(log n).

use super::events::{Event, Events};
use crate::alloc::filled;
use crate::error::Result;
use std::collections::{BTreeMap, HashMap};

/// Whether a change due at `t` needs an event of its own, the pending one being due at
/// `scheduled` (NaN: none pending): false when they are the same to within rounding (shared
/// with the time slices, `super::slices`).
#[inline]
pub(super) fn off_schedule(scheduled: f64, t: f64) -> bool {
    // (With none pending, `scheduled` is NaN, and so is the difference.)
    let off = (scheduled - t).abs();
    off.is_nan() || off > 1e-12 * t.abs().max(1e-3)
}

/// No group (the end of the active list).
const NONE: u32 = u32::MAX;

/// 64 bytes, aligned to a cache line: a dyno's groups are whole lines.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
struct Group {
    /// The work each of its jobs has done, as of the sharing's clock at `clock_at`.
    virtual_time: f64,
    /// The sharing's clock ([`Sharing`]'s `clock`) when `virtual_time` was last brought up
    /// to date: the group's jobs have each done `(clock - clock_at) * share` more since.
    clock_at: f64,
    /// What a job of the group gets of the sharing's clock: 1 / (its jobs (with a lock: they
    /// share the process's turn) times its own slowdown). Kept as a multiplier: the chain
    /// of a change's arithmetic then has no division in it.
    share: f64,
    /// The sharing's clock at which the job with the smallest tag is done (infinite with no
    /// job): fixed until the group changes.
    due: f64,
    /// The group's own slowdown.
    factor: f64,
    /// The smallest tag and its request.
    first_tag: f64,
    first_req: u32,
    /// Jobs: `jobs[start .. start + len]` of the store, in the order they joined.
    start: u32,
    len: u32,
    /// The next active group (by index in the store), in the order they became active.
    next: u32,
}

/// The jobs of a store of one unbounded group, by (tag, order of joining) (see the module's
/// documentation).
#[derive(Debug, Clone, Default)]
struct TagIndex {
    /// (the tag's bits in an order that is the tag's, the job's number in the order of
    /// joining) → (request, tag).
    by_tag: BTreeMap<(u64, u64), (u32, f64)>,
    /// Request → its key in `by_tag`.
    of_req: HashMap<u32, (u64, u64)>,
    /// The next job's number.
    joined: u64,
    /// The jobs done at an instant, (number, request) (reused).
    found: Vec<(u64, u32)>,
}

/// A tag's bits ordered as the tags are (−0 taken as +0, which `<` does not tell apart).
#[inline]
fn tag_order(tag: f64) -> u64 {
    let bits = (tag + 0.0).to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

impl TagIndex {
    fn insert(&mut self, req: u32, tag: f64) {
        let key = (tag_order(tag), self.joined);
        self.joined += 1;
        self.by_tag.insert(key, (req, tag));
        let old = self.of_req.insert(req, key);
        debug_assert!(old.is_none(), "a request shares a resource twice");
    }

    fn remove(&mut self, req: u32) -> bool {
        match self.of_req.remove(&req) {
            Some(key) => {
                self.by_tag.remove(&key);
                true
            }
            None => false,
        }
    }

    fn tag(&self, req: u32) -> Option<f64> {
        self.of_req.get(&req).map(|key| self.by_tag[key].1)
    }

    /// The least tag and its request (the first to join among equal tags).
    fn first(&self) -> (f64, u32) {
        self.by_tag
            .first_key_value()
            .map_or((f64::INFINITY, u32::MAX), |(_, &(req, tag))| (tag, req))
    }
}

/// The groups and jobs of a number of [`Sharing`]s (see the module's documentation).
#[derive(Debug, Clone)]
pub(super) struct SharingStore {
    groups: Vec<Group>,
    /// (request, tag), for a store whose groups hold at most `per_group` jobs each.
    jobs: Vec<(u32, f64)>,
    /// The jobs of a store of one unbounded group (`per_group` None), by tag.
    index: TagIndex,
    /// Groups per sharing.
    per_sharing: u32,
    /// Jobs a group holds at most (None: one group, as many as come).
    per_group: Option<u32>,
    /// 1 / n for a group's n jobs (0 for none), up to `per_group`.
    reciprocals: Vec<f64>,
    /// What every sharing of the store has: its servers, 1 / servers, and whether its
    /// groups' jobs take turns under a lock (kept here rather than in each [`Sharing`], whose
    /// header is then one cache line).
    servers: f64,
    per_server: f64,
    lock: bool,
}

impl SharingStore {
    /// Room for `sharings` sharings of `groups` groups (at least 1) of at most `per_group`
    /// jobs each, or with `per_group` None one sharing of one group and any number of jobs;
    /// each sharing of `servers` servers, with or without a `lock`.
    pub fn new(
        sharings: u32,
        groups: u32,
        per_group: Option<u32>,
        servers: u32,
        lock: bool,
    ) -> Result<Self> {
        let per_sharing = groups.max(1);
        let n = sharings as usize * per_sharing as usize;
        debug_assert!(per_group.is_some() || n == 1);
        let stride = per_group.unwrap_or(0) as usize;
        let mut all = filled(
            n,
            Group {
                virtual_time: 0.0,
                clock_at: 0.0,
                share: 1.0,
                due: f64::INFINITY,
                factor: 1.0,
                first_tag: f64::INFINITY,
                first_req: u32::MAX,
                start: 0,
                len: 0,
                next: NONE,
            },
        )?;
        for (i, g) in all.iter_mut().enumerate() {
            g.start = u32::try_from(i * stride).expect("CPU jobs fit u32 indexes");
        }
        Ok(SharingStore {
            groups: all,
            jobs: filled(n * stride, (0, 0.0))?,
            index: TagIndex::default(),
            per_sharing,
            per_group,
            reciprocals: (0..=per_group.unwrap_or(0))
                .map(|n| if n == 0 { 0.0 } else { 1.0 / f64::from(n) })
                .collect(),
            servers: f64::from(servers),
            per_server: 1.0 / f64::from(servers.max(1)),
            lock,
        })
    }

    /// The header of sharing `k` of the store.
    pub fn sharing(&self, k: u32) -> Sharing {
        Sharing {
            base: k * self.per_sharing,
            head: NONE,
            tail: NONE,
            active: 0,
            jobs: 0,
            soonest: u32::MAX,
            last: 0.0,
            clock: 0.0,
            scheduled: f64::NAN,
            slowdown: 1.0,
            speedup: 1.0,
        }
    }

    /// Asks for sharing `k`'s groups and jobs, every line of them (see
    /// [`crate::alloc::prefetch`]; a sharing with a bound on its groups' jobs only).
    #[inline]
    pub fn prefetch(&self, k: u32) {
        let first = (k * self.per_sharing) as usize;
        let groups = &self.groups[first..][..self.per_sharing as usize];
        crate::alloc::prefetch_all(groups);
        if let Some(per_group) = self.per_group {
            let jobs = groups.len() * per_group as usize;
            if let Some(jobs) = self
                .jobs
                .get(first * per_group as usize..)
                .and_then(|j| j.get(..jobs))
            {
                crate::alloc::prefetch_all(jobs);
            }
        }
    }

    #[inline]
    fn jobs_of(&self, g: usize) -> &[(u32, f64)] {
        let grp = &self.groups[g];
        &self.jobs[grp.start as usize..][..grp.len as usize]
    }

    #[inline]
    fn push(&mut self, g: usize, job: (u32, f64)) {
        let grp = &mut self.groups[g];
        let at = (grp.start + grp.len) as usize;
        match self.per_group {
            Some(bound) => {
                debug_assert!(grp.len < bound, "more jobs than a group holds");
                self.jobs[at] = job;
            }
            None => self.index.insert(job.0, job.1),
        }
        grp.len += 1;
    }

    /// Takes the job of `req` out of group `g` of an unbounded store (it is there).
    #[inline]
    fn remove_req(&mut self, g: usize, req: u32) {
        let found = self.index.remove(req);
        debug_assert!(found, "the job is in the group");
        self.groups[g].len -= 1;
    }

    /// Takes job `i` out of group `g` of a bounded store, keeping the others in order;
    /// returns its request.
    #[inline]
    fn remove(&mut self, g: usize, i: usize) -> u32 {
        let grp = &mut self.groups[g];
        let start = grp.start as usize;
        let end = start + grp.len as usize;
        let req = self.jobs[start + i].0;
        self.jobs.copy_within(start + i + 1..end, start + i);
        grp.len -= 1;
        req
    }

    fn find_first(&mut self, g: usize) {
        let mut first = (f64::INFINITY, u32::MAX);
        if self.per_group.is_none() {
            first = self.index.first();
        } else {
            for &(req, tag) in self.jobs_of(g) {
                if tag < first.0 {
                    first = (tag, req);
                }
            }
        }
        let grp = &mut self.groups[g];
        (grp.first_tag, grp.first_req) = first;
    }

    /// Brings group `g`'s virtual time up to the sharing's clock.
    #[inline]
    fn sync(&mut self, g: usize, clock: f64) {
        let grp = &mut self.groups[g];
        grp.virtual_time += (clock - grp.clock_at) * grp.share;
        grp.clock_at = clock;
    }

    /// After group `g` changed (a job, its factor; synced at `clock`): its jobs' share and
    /// when its first job is done.
    #[inline]
    fn reweigh(&mut self, g: usize, lock: bool) {
        let grp = &mut self.groups[g];
        let (weight, share) = if lock {
            let jobs = f64::from(grp.len);
            let share = if grp.factor == 1.0 {
                self.reciprocals[grp.len as usize]
            } else {
                1.0 / (jobs * grp.factor)
            };
            (jobs * grp.factor, share)
        } else if grp.factor == 1.0 {
            (1.0, 1.0)
        } else {
            (grp.factor, 1.0 / grp.factor)
        };
        grp.share = share;
        grp.due = grp.clock_at + (grp.first_tag - grp.virtual_time).max(0.0) * weight;
    }
}

/// One processor-sharing component's own state; its groups and jobs are in a
/// [`SharingStore`], passed to every method, which also holds what every sharing of the store
/// has (servers, lock). One cache line: what every change reads and writes, and nothing else
/// (how fast the clock runs is worked out from it when needed, rather than kept).
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct Sharing {
    /// Its first group's index in the store.
    base: u32,
    /// Groups with jobs, in the order they became active: a list through `Group::next`.
    head: u32,
    tail: u32,
    active: u32,
    jobs: u32,
    /// The job that completes first, as of the last [`Self::next_completion`]: rates change
    /// only there, so the order of completions holds until it is called again.
    soonest: u32,
    last: f64,
    /// The sharing's clock: what one runnable process (without a lock: one job) of no
    /// slowdown of its own has had of a server since the sharing was last idle, as of `last`.
    clock: f64,
    /// When the pending completion event is due (NaN: none pending).
    scheduled: f64,
    slowdown: f64,
    /// 1 / slowdown.
    speedup: f64,
}

impl Sharing {
    #[inline]
    fn group_of(&self, store: &SharingStore, group: u32) -> usize {
        (self.base + if store.per_sharing == 1 { 0 } else { group }) as usize
    }

    /// The job expected to complete first, as of the last [`Self::next_completion`].
    #[inline]
    pub fn soonest(&self) -> u32 {
        self.soonest
    }

    /// Notes when the pending completion event is due (None: none is).
    #[inline]
    pub fn set_scheduled(&mut self, at: Option<f64>) {
        self.scheduled = at.unwrap_or(f64::NAN);
    }

    #[inline]
    fn runnable(&self, store: &SharingStore) -> u32 {
        if store.lock {
            self.active
        } else {
            self.jobs
        }
    }

    /// Servers in use now.
    pub fn busy_servers(&self, store: &SharingStore) -> f64 {
        f64::from(self.runnable(store)).min(store.servers)
    }

    /// How fast the clock runs now: min(1, servers / runnable) / slowdown.
    #[inline]
    fn speed(&self, store: &SharingStore) -> f64 {
        let runnable = f64::from(self.runnable(store));
        // min(1, servers / runnable): 1 exactly when runnable <= servers (a quotient >= 1).
        if runnable <= store.servers {
            self.speedup
        } else {
            (store.servers / runnable).min(1.0) * self.speedup
        }
    }

    /// 1 / [`Self::speed`], worked out without a division.
    #[inline]
    fn delay(&self, store: &SharingStore) -> f64 {
        let runnable = f64::from(self.runnable(store));
        if runnable <= store.servers {
            self.slowdown
        } else {
            runnable * store.per_server * self.slowdown
        }
    }

    /// Moves the sharing's clock on to `now`; returns the servers in use over the span since
    /// the last change (0 if none or no span: for utilisation) and when it began.
    #[inline]
    pub fn advance(&mut self, store: &mut SharingStore, now: f64) -> (f64, f64) {
        let dt = now - self.last;
        let from = self.last;
        self.last = now;
        if dt <= 0.0 || self.jobs == 0 {
            return (0.0, from);
        }
        self.clock += self.speed(store) * dt;
        (self.busy_servers(store), from)
    }

    /// Adds a job (after [`Self::advance`]).
    #[inline]
    pub fn add(&mut self, store: &mut SharingStore, req: u32, group: u32, work: f64) {
        if self.jobs == 0 {
            // The clock restarts with the sharing: tags stay small, and precise.
            self.clock = 0.0;
        }
        let clock = self.clock;
        let g = self.group_of(store, group);
        let grp = &mut store.groups[g];
        if grp.len == 0 {
            // Virtual time restarts with the group.
            grp.virtual_time = 0.0;
            grp.clock_at = clock;
            grp.next = NONE;
            if self.tail == NONE {
                self.head = g as u32;
            } else {
                store.groups[self.tail as usize].next = g as u32;
            }
            self.tail = g as u32;
            self.active += 1;
        } else {
            store.sync(g, clock);
        }
        let grp = &mut store.groups[g];
        let tag = grp.virtual_time + work;
        if tag < grp.first_tag {
            (grp.first_tag, grp.first_req) = (tag, req);
        }
        store.push(g, (req, tag));
        store.reweigh(g, store.lock);
        self.jobs += 1;
    }

    /// Takes job `i` out of group `g` (an index in the store; synced) of a bounded store.
    fn take(&mut self, store: &mut SharingStore, g: usize, i: usize) {
        let req = store.remove(g, i);
        self.taken(store, g, req);
    }

    /// Takes the job of `req` out of group `g` (synced) of an unbounded store.
    fn take_req(&mut self, store: &mut SharingStore, g: usize, req: u32) {
        store.remove_req(g, req);
        self.taken(store, g, req);
    }

    /// After the job of `req` left group `g`.
    fn taken(&mut self, store: &mut SharingStore, g: usize, req: u32) {
        if store.groups[g].first_req == req {
            store.find_first(g);
        }
        store.reweigh(g, store.lock);
        if store.groups[g].len == 0 {
            self.unlink(store, g as u32);
        }
        self.jobs -= 1;
    }

    /// Takes group `g` out of the active list, the others keeping their order.
    fn unlink(&mut self, store: &mut SharingStore, g: u32) {
        let next = store.groups[g as usize].next;
        let mut prev = NONE;
        let mut at = self.head;
        while at != g {
            prev = at;
            at = store.groups[at as usize].next;
        }
        if prev == NONE {
            self.head = next;
        } else {
            store.groups[prev as usize].next = next;
        }
        if self.tail == g {
            self.tail = prev;
        }
        self.active -= 1;
    }

    /// The work a job has left (after [`Self::advance`]), or None if it is not here.
    pub fn remaining(&self, store: &mut SharingStore, req: u32) -> Option<f64> {
        if store.per_group.is_none() {
            let g = self.base as usize;
            let tag = store.index.tag(req)?;
            store.sync(g, self.clock);
            return Some((tag - store.groups[g].virtual_time).max(0.0));
        }
        for g in self.base..self.base + store.per_sharing {
            let g = g as usize;
            if let Some(&(_, tag)) = store.jobs_of(g).iter().find(|&&(r, _)| r == req) {
                store.sync(g, self.clock);
                return Some((tag - store.groups[g].virtual_time).max(0.0));
            }
        }
        None
    }

    /// Removes a job wherever it is (a request killed with its dyno); after [`Self::advance`].
    pub fn remove(&mut self, store: &mut SharingStore, req: u32) -> bool {
        if store.per_group.is_none() {
            let g = self.base as usize;
            if store.index.tag(req).is_none() {
                return false;
            }
            store.sync(g, self.clock);
            self.take_req(store, g, req);
            return true;
        }
        for g in self.base..self.base + store.per_sharing {
            let g = g as usize;
            if let Some(i) = store.jobs_of(g).iter().position(|&(r, _)| r == req) {
                store.sync(g, self.clock);
                self.take(store, g, i);
                return true;
            }
        }
        false
    }

    pub fn set_slowdown(&mut self, slowdown: f64) -> bool {
        let changed = slowdown != self.slowdown;
        if changed {
            self.slowdown = slowdown;
            self.speedup = 1.0 / slowdown;
        }
        changed
    }

    /// Sets a group's own slowdown; true when it changed (then advance first, and
    /// reschedule after).
    pub fn set_group_factor(&mut self, store: &mut SharingStore, group: u32, factor: f64) -> bool {
        let g = self.group_of(store, group);
        let changed = store.groups[g].factor != factor;
        if changed {
            if store.groups[g].len > 0 {
                store.sync(g, self.clock);
            }
            store.groups[g].factor = factor;
            store.reweigh(g, store.lock);
        }
        changed
    }

    /// Whether a completion due at `t` needs an event of its own: false when the pending one
    /// is already due then (to within rounding), as when a job joins without changing the
    /// others' rates. Sparing the event keeps stale ones out of the queue.
    #[inline]
    pub fn needs_event(&self, t: f64) -> bool {
        off_schedule(self.scheduled, t)
    }

    /// When the next job completes (None with no jobs): the group due first on the clock,
    /// and how long the clock takes to get there at its speed.
    #[inline]
    pub fn next_completion(&mut self, store: &mut SharingStore, now: f64) -> Option<f64> {
        if self.jobs == 0 {
            return None;
        }
        let mut due = f64::INFINITY;
        let mut g = self.head;
        while g != NONE {
            let grp = &store.groups[g as usize];
            if grp.due < due {
                due = grp.due;
                self.soonest = grp.first_req;
            }
            g = grp.next;
        }
        Some(now + (due - self.clock).max(0.0) * self.delay(store))
    }

    /// Takes out the jobs done at `now` (after [`Self::advance`]): those whose tag their
    /// group's virtual time has reached, to within rounding, and at least the one that was
    /// due. Their requests are appended to `done`.
    pub fn take_done(&mut self, store: &mut SharingStore, now: f64, done: &mut Vec<u32>) {
        // What the clock can resolve at `now`: a few ulps of the time, on the sharing's
        // clock, then in each group's work.
        let eps = (now.abs() * 8.0 * f64::EPSILON).max(1e-15) * self.speed(store).max(1e-300);
        let (soonest, clock) = (self.soonest, self.clock);
        let mut g = self.head;
        while g != NONE {
            let gi = g as usize;
            // Read before the group may leave the list.
            let grp = &store.groups[gi];
            g = grp.next;
            if grp.due - clock > eps && grp.first_req != soonest {
                continue;
            }
            store.sync(gi, clock);
            let grp = &store.groups[gi];
            let (virtual_time, slack) = (grp.virtual_time, eps * grp.share);
            if store.per_group.is_none() {
                self.take_done_indexed(store, gi, virtual_time, slack, done);
                continue;
            }
            let mut i = 0;
            while i < store.groups[gi].len as usize {
                let (req, tag) = store.jobs_of(gi)[i];
                if tag - virtual_time <= slack || req == soonest {
                    done.push(req);
                    self.take(store, gi, i);
                } else {
                    i += 1;
                }
            }
        }
    }
}

impl Sharing {
    /// [`Self::take_done`]'s pass over group `gi` of an unbounded store: the jobs whose tag
    /// less `virtual_time` is within `slack` (a prefix of the order by tag), and the soonest
    /// job wherever it is, handed out in the order they joined.
    fn take_done_indexed(
        &mut self,
        store: &mut SharingStore,
        gi: usize,
        virtual_time: f64,
        slack: f64,
        done: &mut Vec<u32>,
    ) {
        let soonest = self.soonest;
        let mut found = std::mem::take(&mut store.index.found);
        found.clear();
        let mut has_soonest = false;
        for (&(_, joined), &(req, tag)) in &store.index.by_tag {
            if tag - virtual_time <= slack {
                has_soonest |= req == soonest;
                found.push((joined, req));
            } else {
                break;
            }
        }
        if !has_soonest {
            if let Some(&(_, joined)) = store.index.of_req.get(&soonest) {
                found.push((joined, soonest));
            }
        }
        found.sort_unstable();
        for &(_, req) in &found {
            done.push(req);
            self.take_req(store, gi, req);
        }
        store.index.found = found;
    }
}

/// Keeps a processor-sharing component's one completion event right after a change: moved
/// when its next completion moved, taken back when it has no jobs left.
pub(super) fn schedule_next(
    events: &mut Events,
    sharing: &mut Sharing,
    store: &mut SharingStore,
    now: f64,
    event: Event,
) {
    match sharing.next_completion(store, now) {
        Some(t) if !sharing.needs_event(t) => {}
        Some(t) => {
            sharing.set_scheduled(Some(t));
            events.reschedule(t, event, sharing.soonest());
        }
        None => {
            sharing.set_scheduled(None);
            events.cancel(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sharing_s_header_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Sharing>(), 64);
        assert_eq!(std::mem::align_of::<Sharing>(), 64);
    }

    #[test]
    fn two_jobs_on_one_server_each_run_at_half_speed() {
        let mut st = SharingStore::new(1, 1, None, 1, false).unwrap();
        let mut s = st.sharing(0);
        s.advance(&mut st, 0.0);
        s.add(&mut st, 1, 0, 1.0);
        s.add(&mut st, 2, 0, 3.0);
        // Both at rate 1/2: job 1 done at t = 2, having left job 2 with 2 s of work.
        let t = s.next_completion(&mut st, 0.0).unwrap();
        assert!((t - 2.0).abs() < 1e-12);
        s.advance(&mut st, t);
        let mut done = Vec::new();
        s.take_done(&mut st, t, &mut done);
        assert_eq!(done, [1]);
        // Alone, job 2 finishes its 2 s at full speed.
        let t2 = s.next_completion(&mut st, t).unwrap();
        assert!((t2 - 4.0).abs() < 1e-12);
    }

    #[test]
    fn a_lock_lets_one_job_of_a_process_compute_at_a_time() {
        // Two cores; process 0 has two jobs, process 1 one: each process gets a core, so
        // process 0's jobs run at 1/2 and process 1's at 1.
        let mut st = SharingStore::new(1, 2, Some(4), 2, true).unwrap();
        let mut s = st.sharing(0);
        s.add(&mut st, 10, 0, 1.0);
        s.add(&mut st, 11, 0, 1.0);
        s.add(&mut st, 20, 1, 1.0);
        let t = s.next_completion(&mut st, 0.0).unwrap();
        assert!((t - 1.0).abs() < 1e-12);
        assert_eq!(s.busy_servers(&st), 2.0);
        s.advance(&mut st, t);
        let mut done = Vec::new();
        s.take_done(&mut st, t, &mut done);
        assert_eq!(done, [20]);
        // Without a lock the three jobs would share two cores at 2/3 each.
        let mut fst = SharingStore::new(1, 2, Some(4), 2, false).unwrap();
        let mut free = fst.sharing(0);
        free.add(&mut fst, 10, 0, 1.0);
        free.add(&mut fst, 11, 0, 1.0);
        free.add(&mut fst, 20, 1, 1.0);
        assert!((free.next_completion(&mut fst, 0.0).unwrap() - 1.5).abs() < 1e-12);
    }

    #[test]
    fn a_slowdown_divides_every_rate() {
        let mut st = SharingStore::new(1, 1, None, 1, false).unwrap();
        let mut s = st.sharing(0);
        s.add(&mut st, 1, 0, 1.0);
        s.set_slowdown(4.0);
        assert!((s.next_completion(&mut st, 0.0).unwrap() - 4.0).abs() < 1e-12);
    }

    /// The jobs' remaining work, every rate worked out from scratch at each step: what the
    /// sharing's clocks must reproduce.
    struct Reference {
        servers: f64,
        lock: bool,
        slowdown: f64,
        factors: Vec<f64>,
        /// (request, group, remaining work).
        jobs: Vec<(u32, u32, f64)>,
    }

    impl Reference {
        fn rate(&self, group: u32) -> f64 {
            let len = self.jobs.iter().filter(|j| j.1 == group).count() as f64;
            let mut groups: Vec<u32> = self.jobs.iter().map(|j| j.1).collect();
            groups.sort_unstable();
            groups.dedup();
            let runnable = if self.lock {
                groups.len()
            } else {
                self.jobs.len()
            } as f64;
            let share = (self.servers / runnable).min(1.0) / self.slowdown;
            let per_job = if self.lock { share / len } else { share };
            per_job / self.factors[group as usize]
        }

        /// The next completion's delay and request.
        fn next(&self) -> Option<(f64, u32)> {
            self.jobs
                .iter()
                .map(|&(req, g, left)| (left / self.rate(g), req))
                .min_by(|a, b| a.0.total_cmp(&b.0))
        }

        fn advance(&mut self, dt: f64) {
            let rates: Vec<f64> = self.jobs.iter().map(|j| self.rate(j.1)).collect();
            for (job, rate) in self.jobs.iter_mut().zip(rates) {
                job.2 -= rate * dt;
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add {
            group: u32,
            work: f64,
        },
        /// On to this fraction of the way to the next completion.
        Wait(f64),
        /// On to the next completion.
        Complete,
        Factor {
            group: u32,
            factor: f64,
        },
        Slowdown(f64),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0..3u32, 0.001..5.0f64).prop_map(|(group, work)| Op::Add { group, work }),
            2 => (0.0..1.0f64).prop_map(Op::Wait),
            4 => Just(Op::Complete),
            1 => (0..3u32, 1.0..3.0f64).prop_map(|(group, factor)| Op::Factor { group, factor }),
            1 => (1.0..2.0f64).prop_map(Op::Slowdown),
        ]
    }

    proptest::proptest! {
        /// Against the reference, through random joins, waits, completions and slowdowns, on
        /// 1 or 2 servers, with and without a lock: the same next completion (to 1e-9
        /// relative) and the same requests done.
        #[test]
        fn clocks_match_the_rates_worked_out_from_scratch(
            servers in 1..3u32,
            lock in proptest::bool::ANY,
            ops in proptest::collection::vec(op(), 1..120),
        ) {
            let mut st = SharingStore::new(1, 3, Some(64), servers, lock).unwrap();
            let mut s = st.sharing(0);
            let mut r = Reference {
                servers: f64::from(servers),
                lock,
                slowdown: 1.0,
                factors: vec![1.0; 3],
                jobs: Vec::new(),
            };
            let (mut now, mut next_req, mut done) = (0.0, 0u32, Vec::new());
            for op in ops {
                match op {
                    Op::Add { group, work } => {
                        if r.jobs.iter().filter(|j| j.1 == group).count() == 64 {
                            continue;
                        }
                        s.add(&mut st, next_req, group, work);
                        r.jobs.push((next_req, group, work));
                        next_req += 1;
                    }
                    Op::Wait(f) => {
                        let dt = r.next().map_or(1.0, |n| n.0 * f);
                        now += dt;
                        s.advance(&mut st, now);
                        r.advance(dt);
                    }
                    Op::Complete => {
                        let Some((dt, req)) = r.next() else { continue };
                        let t = s.next_completion(&mut st, now).unwrap();
                        proptest::prop_assert!(
                            ((t - now) - dt).abs() <= 1e-9 * dt.max(1e-3),
                            "next completion in {} against {dt}", t - now
                        );
                        proptest::prop_assert_eq!(s.soonest(), req);
                        now = t;
                        s.advance(&mut st, now);
                        r.advance(dt);
                        done.clear();
                        s.take_done(&mut st, now, &mut done);
                        proptest::prop_assert!(done.contains(&req));
                        for d in &done {
                            let i = r.jobs.iter().position(|j| j.0 == *d).unwrap();
                            proptest::prop_assert!(r.jobs[i].2.abs() <= 1e-9);
                            r.jobs.remove(i);
                        }
                    }
                    Op::Factor { group, factor } => {
                        s.advance(&mut st, now);
                        s.set_group_factor(&mut st, group, factor);
                        r.factors[group as usize] = factor;
                    }
                    Op::Slowdown(f) => {
                        s.advance(&mut st, now);
                        s.set_slowdown(f);
                        r.slowdown = f;
                    }
                }
                proptest::prop_assert_eq!(s.busy_servers(&st), {
                    let mut g: Vec<u32> = r.jobs.iter().map(|j| j.1).collect();
                    g.sort_unstable();
                    g.dedup();
                    (if lock { g.len() } else { r.jobs.len() } as f64).min(f64::from(servers))
                });
            }
        }

        /// A resource's store (one group, no bound: its jobs by tag) against the same jobs in
        /// a bounded store's one group (a pass over them in the order they joined): the same
        /// completions to the bit, the same requests done in the same order, the same work
        /// left, through joins (ties of tags included), waits, completions (a job joining
        /// between a completion's scheduling and its event included), removals and slowdowns.
        #[test]
        fn a_resource_s_index_by_tag_is_the_pass_over_its_jobs(
            servers in 1..4u32,
            ops in proptest::collection::vec(resource_op(), 1..200),
        ) {
            let mut ust = SharingStore::new(1, 1, None, servers, false).unwrap();
            let mut bst = SharingStore::new(1, 1, Some(256), servers, false).unwrap();
            let (mut u, mut b) = (ust.sharing(0), bst.sharing(0));
            let (mut now, mut next_req) = (0.0f64, 0u32);
            let mut live: Vec<u32> = Vec::new();
            let (mut ud, mut bd) = (Vec::new(), Vec::new());
            for op in ops {
                match op {
                    ResourceOp::Add(work) => {
                        if live.len() == 256 {
                            continue;
                        }
                        u.add(&mut ust, next_req, 0, work);
                        b.add(&mut bst, next_req, 0, work);
                        live.push(next_req);
                        next_req += 1;
                    }
                    ResourceOp::Wait(dt) => {
                        now += dt;
                        u.advance(&mut ust, now);
                        b.advance(&mut bst, now);
                    }
                    ResourceOp::Complete { join_first } => {
                        let tu = u.next_completion(&mut ust, now);
                        let tb = b.next_completion(&mut bst, now);
                        proptest::prop_assert_eq!(tu.map(f64::to_bits), tb.map(f64::to_bits));
                        let Some(t) = tu else { continue };
                        proptest::prop_assert_eq!(u.soonest(), b.soonest());
                        if let Some(work) = join_first {
                            if live.len() < 256 {
                                u.add(&mut ust, next_req, 0, work);
                                b.add(&mut bst, next_req, 0, work);
                                live.push(next_req);
                                next_req += 1;
                            }
                        }
                        now = t;
                        u.advance(&mut ust, now);
                        b.advance(&mut bst, now);
                        ud.clear();
                        bd.clear();
                        u.take_done(&mut ust, now, &mut ud);
                        b.take_done(&mut bst, now, &mut bd);
                        proptest::prop_assert_eq!(&ud, &bd);
                        live.retain(|r| !ud.contains(r));
                    }
                    ResourceOp::Remove(pick) => {
                        if live.is_empty() {
                            continue;
                        }
                        let req = live.remove(pick % live.len());
                        u.advance(&mut ust, now);
                        b.advance(&mut bst, now);
                        let (ru, rb) = (u.remaining(&mut ust, req), b.remaining(&mut bst, req));
                        proptest::prop_assert_eq!(ru.map(f64::to_bits), rb.map(f64::to_bits));
                        proptest::prop_assert!(u.remove(&mut ust, req));
                        proptest::prop_assert!(b.remove(&mut bst, req));
                        proptest::prop_assert!(!u.remove(&mut ust, req));
                        proptest::prop_assert_eq!(u.remaining(&mut ust, req), None);
                    }
                    ResourceOp::Slowdown(f) => {
                        u.advance(&mut ust, now);
                        b.advance(&mut bst, now);
                        u.set_slowdown(f);
                        b.set_slowdown(f);
                    }
                }
                proptest::prop_assert_eq!(u.busy_servers(&ust), b.busy_servers(&bst));
            }
        }
    }

    #[derive(Debug, Clone)]
    enum ResourceOp {
        Add(f64),
        Wait(f64),
        /// To the next completion; with Some(work), a job of that work joins first, at the
        /// completion's scheduling time.
        Complete {
            join_first: Option<f64>,
        },
        Remove(usize),
        Slowdown(f64),
    }

    fn resource_op() -> impl proptest::strategy::Strategy<Value = ResourceOp> {
        use proptest::prelude::*;
        // Works from a small set as well as any: jobs joining together with equal work tie.
        let work = prop_oneof![0.001..5.0f64, proptest::sample::select(vec![0.5, 1.0, 2.0])];
        prop_oneof![
            5 => work.clone().prop_map(ResourceOp::Add),
            2 => (0.0..1.0f64).prop_map(ResourceOp::Wait),
            4 => proptest::option::of(work).prop_map(|join_first| ResourceOp::Complete { join_first }),
            1 => any::<usize>().prop_map(ResourceOp::Remove),
            1 => (1.0..2.0f64).prop_map(ResourceOp::Slowdown),
        ]
    }
}
