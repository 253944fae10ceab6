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
//! with work w is done when the group's virtual time reaches V + w, its tag. A change (a job
//! joins or leaves, a factor changes) advances each active group's virtual time and sets the
//! rates anew: its cost grows with the groups (processes), not with the jobs. The next
//! completion is moved (in the event queue, [`crate::kernel`]) only when it moves by more than
//! rounding.
//!
//! **Storage.** A [`Sharing`] is a small header with no allocation of its own: its groups and
//! their jobs live in a [`SharingStore`] shared by many (every dyno's CPU in one store), at
//! places computed from the sharing's number, so that the state of a dyno's CPU is three
//! regions whose addresses are known at once (header, groups, jobs) rather than a chain of
//! pointers to follow (it was five allocations a dyno; with 100,000 dynos each was a cache
//! miss). Group `g` of sharing `k` is `groups[k * G + g]`, and its jobs are
//! `jobs[(k * G + g) * J ..][.. len]` for at most `J` jobs a group (a process's threads). A
//! store of one group may instead have no bound (a resource's jobs): its jobs are the whole
//! vector.

use crate::alloc::filled;
use crate::error::Result;

/// x / y, without the division when y is 1 (no slowdown, one job, a full server): the same
/// double (dividing by 1 is exact), at a fraction of a division's latency. The divisions of
/// [`Sharing::next_completion`] are a chain, and were most of its time.
#[inline]
fn quotient(x: f64, y: f64) -> f64 {
    if y == 1.0 {
        x
    } else {
        x / y
    }
}

/// No group (the end of the active list).
const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Group {
    virtual_time: f64,
    /// Each job's rate now.
    rate: f64,
    /// The group's own slowdown.
    factor: f64,
    /// The smallest tag and its request.
    first: (f64, u32),
    /// Jobs: `jobs[start .. start + len]` of the store, in the order they joined.
    start: u32,
    len: u32,
    /// The next active group (by index in the store), in the order they became active.
    next: u32,
}

/// The groups and jobs of a number of [`Sharing`]s (see the module's documentation).
#[derive(Debug, Clone)]
pub(super) struct SharingStore {
    groups: Vec<Group>,
    /// (request, tag).
    jobs: Vec<(u32, f64)>,
    /// Groups per sharing.
    per_sharing: u32,
    /// Jobs a group holds at most (None: one group, as many as come).
    per_group: Option<u32>,
}

impl SharingStore {
    /// Room for `sharings` sharings of `groups` groups (at least 1) of at most `per_group`
    /// jobs each, or with `per_group` None one sharing of one group and any number of jobs.
    pub fn new(sharings: u32, groups: u32, per_group: Option<u32>) -> Result<Self> {
        let per_sharing = groups.max(1);
        let n = sharings as usize * per_sharing as usize;
        debug_assert!(per_group.is_some() || n == 1);
        let stride = per_group.unwrap_or(0) as usize;
        let mut all = filled(
            n,
            Group {
                virtual_time: 0.0,
                rate: 0.0,
                factor: 1.0,
                first: (f64::INFINITY, u32::MAX),
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
            per_sharing,
            per_group,
        })
    }

    /// The header of sharing `k` of the store.
    pub fn sharing(&self, k: u32, servers: u32, lock: bool) -> Sharing {
        Sharing {
            base: k * self.per_sharing,
            groups: self.per_sharing,
            head: NONE,
            tail: NONE,
            active: 0,
            jobs: 0,
            last: 0.0,
            scheduled: None,
            soonest: u32::MAX,
            servers: f64::from(servers),
            lock,
            slowdown: 1.0,
        }
    }

    /// Sharing `k`'s first group's virtual time: a load that brings its groups into the cache.
    #[inline]
    pub fn touch(&self, k: u32) -> f64 {
        self.groups[(k * self.per_sharing) as usize].virtual_time
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
            None => {
                self.jobs.truncate(at);
                self.jobs.push(job);
            }
        }
        grp.len += 1;
    }

    /// Takes job `i` out of group `g`, keeping the others in order; returns its request.
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
        for &(req, tag) in self.jobs_of(g) {
            if tag < first.0 {
                first = (tag, req);
            }
        }
        self.groups[g].first = first;
    }
}

/// One processor-sharing component's own state; its groups and jobs are in a
/// [`SharingStore`], passed to every method.
#[derive(Debug, Clone)]
pub struct Sharing {
    /// Its first group's index in the store, and how many it has.
    base: u32,
    groups: u32,
    /// Groups with jobs, in the order they became active: a list through `Group::next`.
    head: u32,
    tail: u32,
    active: u32,
    jobs: u32,
    last: f64,
    /// When the pending completion event is due (None: none pending).
    pub scheduled: Option<f64>,
    /// The job that completes first, as of the last [`Self::next_completion`]: rates change
    /// only there, so the order of completions holds until it is called again.
    soonest: u32,
    servers: f64,
    lock: bool,
    slowdown: f64,
}

impl Sharing {
    /// The same header for sharing `k` of its store (dynos are made from one template).
    pub fn placed(mut self, k: u32) -> Sharing {
        self.base = k * self.groups;
        self
    }

    #[inline]
    fn group_of(&self, group: u32) -> usize {
        (self.base + if self.groups == 1 { 0 } else { group }) as usize
    }

    /// The job expected to complete first, as of the last [`Self::next_completion`].
    #[inline]
    pub fn soonest(&self) -> u32 {
        self.soonest
    }

    /// Servers in use now.
    pub fn busy_servers(&self) -> f64 {
        let runnable = if self.lock { self.active } else { self.jobs };
        f64::from(runnable).min(self.servers)
    }

    /// Moves every active group's virtual time on to `now`; returns the server-seconds used
    /// over the span since the last change (for utilisation) and when it began.
    #[inline]
    pub fn advance(&mut self, store: &mut SharingStore, now: f64) -> (f64, f64) {
        let dt = now - self.last;
        let from = self.last;
        self.last = now;
        if dt <= 0.0 || self.jobs == 0 {
            return (0.0, from);
        }
        let mut g = self.head;
        while g != NONE {
            let group = &mut store.groups[g as usize];
            group.virtual_time += group.rate * dt;
            g = group.next;
        }
        (self.busy_servers() * dt, from)
    }

    /// Adds a job (after [`Self::advance`]).
    #[inline]
    pub fn add(&mut self, store: &mut SharingStore, req: u32, group: u32, work: f64) {
        let g = self.group_of(group);
        let grp = &mut store.groups[g];
        if grp.len == 0 {
            // Virtual time restarts with the group: tags stay small, and precise.
            grp.virtual_time = 0.0;
            grp.next = NONE;
            if self.tail == NONE {
                self.head = g as u32;
            } else {
                store.groups[self.tail as usize].next = g as u32;
            }
            self.tail = g as u32;
            self.active += 1;
        }
        let grp = &mut store.groups[g];
        let tag = grp.virtual_time + work;
        if tag < grp.first.0 {
            grp.first = (tag, req);
        }
        store.push(g, (req, tag));
        self.jobs += 1;
    }

    /// Takes job `i` out of group `g` (an index in the store).
    fn take(&mut self, store: &mut SharingStore, g: usize, i: usize) {
        let req = store.remove(g, i);
        if store.groups[g].first.1 == req {
            store.find_first(g);
        }
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

    /// Removes a job wherever it is (a request killed with its dyno); after [`Self::advance`].
    pub fn remove(&mut self, store: &mut SharingStore, req: u32) -> bool {
        for g in self.base..self.base + self.groups {
            let g = g as usize;
            if let Some(i) = store.jobs_of(g).iter().position(|&(r, _)| r == req) {
                self.take(store, g, i);
                return true;
            }
        }
        false
    }

    pub fn set_slowdown(&mut self, slowdown: f64) -> bool {
        let changed = slowdown != self.slowdown;
        self.slowdown = slowdown;
        changed
    }

    /// Sets a group's own slowdown; true when it changed (then advance first, and
    /// reschedule after).
    pub fn set_group_factor(&mut self, store: &mut SharingStore, group: u32, factor: f64) -> bool {
        let g = self.group_of(group);
        let f = &mut store.groups[g].factor;
        let changed = *f != factor;
        *f = factor;
        changed
    }

    /// Whether a completion due at `t` needs an event of its own: false when the pending one
    /// is already due then (to within rounding), as when a job joins without changing the
    /// others' rates. Sparing the event keeps stale ones out of the queue.
    #[inline]
    pub fn needs_event(&self, t: f64) -> bool {
        !self
            .scheduled
            .is_some_and(|s| (s - t).abs() <= 1e-12 * t.abs().max(1e-3))
    }

    /// Sets every group's rate and returns when the next job completes (None with no jobs).
    #[inline]
    pub fn next_completion(&mut self, store: &mut SharingStore, now: f64) -> Option<f64> {
        if self.jobs == 0 {
            return None;
        }
        let runnable = f64::from(if self.lock { self.active } else { self.jobs });
        // min(1, servers / runnable): 1 exactly when runnable <= servers (a quotient >= 1).
        let share = if runnable <= self.servers {
            1.0
        } else {
            (self.servers / runnable).min(1.0)
        };
        let share = quotient(share, self.slowdown);
        let mut soonest = f64::INFINITY;
        let mut g = self.head;
        while g != NONE {
            let grp = &mut store.groups[g as usize];
            let per_job = if self.lock {
                quotient(share, f64::from(grp.len))
            } else {
                share
            };
            grp.rate = quotient(per_job, grp.factor);
            let t = quotient((grp.first.0 - grp.virtual_time).max(0.0), grp.rate);
            if t < soonest {
                soonest = t;
                self.soonest = grp.first.1;
            }
            g = grp.next;
        }
        Some(now + soonest)
    }

    /// Takes out the jobs done at `now` (after [`Self::advance`]): those whose tag their
    /// group's virtual time has reached, to within rounding, and at least the one that was
    /// due. Their requests are appended to `done`.
    pub fn take_done(&mut self, store: &mut SharingStore, now: f64, done: &mut Vec<u32>) {
        // What the clock can resolve at `now`: a few ulps of the time, in each group's work.
        let eps = (now.abs() * 8.0 * f64::EPSILON).max(1e-15);
        let soonest = self.soonest;
        let mut g = self.head;
        while g != NONE {
            let gi = g as usize;
            // Read before the group may leave the list.
            g = store.groups[gi].next;
            let (virtual_time, slack) = {
                let grp = &store.groups[gi];
                (grp.virtual_time, eps * grp.rate.max(1e-300))
            };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_jobs_on_one_server_each_run_at_half_speed() {
        let mut st = SharingStore::new(1, 1, None).unwrap();
        let mut s = st.sharing(0, 1, false);
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
        let mut st = SharingStore::new(1, 2, Some(4)).unwrap();
        let mut s = st.sharing(0, 2, true);
        s.add(&mut st, 10, 0, 1.0);
        s.add(&mut st, 11, 0, 1.0);
        s.add(&mut st, 20, 1, 1.0);
        let t = s.next_completion(&mut st, 0.0).unwrap();
        assert!((t - 1.0).abs() < 1e-12);
        assert_eq!(s.busy_servers(), 2.0);
        s.advance(&mut st, t);
        let mut done = Vec::new();
        s.take_done(&mut st, t, &mut done);
        assert_eq!(done, [20]);
        // Without a lock the three jobs would share two cores at 2/3 each.
        let mut fst = SharingStore::new(1, 2, Some(4)).unwrap();
        let mut free = fst.sharing(0, 2, false);
        free.add(&mut fst, 10, 0, 1.0);
        free.add(&mut fst, 11, 0, 1.0);
        free.add(&mut fst, 20, 1, 1.0);
        assert!((free.next_completion(&mut fst, 0.0).unwrap() - 1.5).abs() < 1e-12);
    }

    #[test]
    fn a_slowdown_divides_every_rate() {
        let mut st = SharingStore::new(1, 1, None).unwrap();
        let mut s = st.sharing(0, 1, false);
        s.add(&mut st, 1, 0, 1.0);
        s.set_slowdown(4.0);
        assert!((s.next_completion(&mut st, 0.0).unwrap() - 4.0).abs() < 1e-12);
    }
}
