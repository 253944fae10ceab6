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

#[derive(Debug, Clone)]
struct Group {
    /// (request, tag) in the order the jobs joined.
    jobs: Vec<(u32, f64)>,
    virtual_time: f64,
    /// Each job's rate now.
    rate: f64,
    /// The group's own slowdown.
    factor: f64,
    /// The smallest tag and its request.
    first: (f64, u32),
}

impl Group {
    fn new() -> Group {
        Group {
            jobs: Vec::new(),
            virtual_time: 0.0,
            rate: 0.0,
            factor: 1.0,
            first: (f64::INFINITY, u32::MAX),
        }
    }

    fn find_first(&mut self) {
        self.first = (f64::INFINITY, u32::MAX);
        for &(req, tag) in &self.jobs {
            if tag < self.first.0 {
                self.first = (tag, req);
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct Sharing {
    groups: Vec<Group>,
    /// Groups with jobs, in the order they became active.
    active: Vec<u32>,
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
    /// `groups`: processes (0: one group for all jobs, for a resource).
    pub fn new(servers: u32, groups: u32, lock: bool) -> Self {
        Sharing {
            groups: vec![Group::new(); groups.max(1) as usize],
            active: Vec::new(),
            jobs: 0,
            last: 0.0,
            scheduled: None,
            soonest: u32::MAX,
            servers: f64::from(servers),
            lock,
            slowdown: 1.0,
        }
    }

    #[inline]
    fn group_of(&self, group: u32) -> usize {
        if self.groups.len() == 1 {
            0
        } else {
            group as usize
        }
    }

    /// Servers in use now.
    pub fn busy_servers(&self) -> f64 {
        let runnable = if self.lock {
            self.active.len() as u32
        } else {
            self.jobs
        };
        f64::from(runnable).min(self.servers)
    }

    /// Moves every active group's virtual time on to `now`; returns the server-seconds used
    /// over the span since the last change (for utilisation) and when it began.
    pub fn advance(&mut self, now: f64) -> (f64, f64) {
        let dt = now - self.last;
        let from = self.last;
        self.last = now;
        if dt <= 0.0 || self.jobs == 0 {
            return (0.0, from);
        }
        for &g in &self.active {
            let group = &mut self.groups[g as usize];
            group.virtual_time += group.rate * dt;
        }
        (self.busy_servers() * dt, from)
    }

    /// Adds a job (after [`Self::advance`]).
    pub fn add(&mut self, req: u32, group: u32, work: f64) {
        let g = self.group_of(group);
        let grp = &mut self.groups[g];
        if grp.jobs.is_empty() {
            // Virtual time restarts with the group: tags stay small, and precise.
            grp.virtual_time = 0.0;
            self.active.push(g as u32);
        }
        let tag = grp.virtual_time + work;
        grp.jobs.push((req, tag));
        if tag < grp.first.0 {
            grp.first = (tag, req);
        }
        self.jobs += 1;
    }

    /// Takes job `i` out of group `g`.
    fn take(&mut self, g: usize, i: usize) {
        let grp = &mut self.groups[g];
        let (req, _) = grp.jobs.remove(i);
        if grp.first.1 == req {
            grp.find_first();
        }
        if grp.jobs.is_empty() {
            self.active.retain(|&a| a as usize != g);
        }
        self.jobs -= 1;
    }

    /// Removes a job wherever it is (a request killed with its dyno); after [`Self::advance`].
    pub fn remove(&mut self, req: u32) -> bool {
        for g in 0..self.groups.len() {
            if let Some(i) = self.groups[g].jobs.iter().position(|&(r, _)| r == req) {
                self.take(g, i);
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
    pub fn set_group_factor(&mut self, group: u32, factor: f64) -> bool {
        let g = self.group_of(group);
        let f = &mut self.groups[g].factor;
        let changed = *f != factor;
        *f = factor;
        changed
    }

    /// Whether a completion due at `t` needs an event of its own: false when the pending one
    /// is already due then (to within rounding), as when a job joins without changing the
    /// others' rates. Sparing the event keeps stale ones out of the queue.
    pub fn needs_event(&self, t: f64) -> bool {
        !self
            .scheduled
            .is_some_and(|s| (s - t).abs() <= 1e-12 * t.abs().max(1e-3))
    }

    /// Sets every group's rate and returns when the next job completes (None with no jobs).
    pub fn next_completion(&mut self, now: f64) -> Option<f64> {
        if self.jobs == 0 {
            return None;
        }
        let share = if self.lock {
            (self.servers / self.active.len() as f64).min(1.0) / self.slowdown
        } else {
            (self.servers / f64::from(self.jobs)).min(1.0) / self.slowdown
        };
        let mut soonest = f64::INFINITY;
        for &g in &self.active {
            let grp = &mut self.groups[g as usize];
            grp.rate = if self.lock {
                share / grp.jobs.len() as f64
            } else {
                share
            } / grp.factor;
            let t = (grp.first.0 - grp.virtual_time).max(0.0) / grp.rate;
            if t < soonest {
                soonest = t;
                self.soonest = grp.first.1;
            }
        }
        Some(now + soonest)
    }

    /// Takes out the jobs done at `now` (after [`Self::advance`]): those whose tag their
    /// group's virtual time has reached, to within rounding, and at least the one that was
    /// due. Their requests are appended to `done`.
    pub fn take_done(&mut self, now: f64, done: &mut Vec<u32>) {
        // What the clock can resolve at `now`: a few ulps of the time, in each group's work.
        let eps = (now.abs() * 8.0 * f64::EPSILON).max(1e-15);
        let soonest = self.soonest;
        let mut a = 0;
        while a < self.active.len() {
            let g = self.active[a] as usize;
            let (virtual_time, slack) = {
                let grp = &self.groups[g];
                (grp.virtual_time, eps * grp.rate.max(1e-300))
            };
            let mut i = 0;
            while i < self.groups[g].jobs.len() {
                let (req, tag) = self.groups[g].jobs[i];
                if tag - virtual_time <= slack || req == soonest {
                    done.push(req);
                    let before = self.active.len();
                    self.take(g, i);
                    if self.active.len() < before {
                        break; // the group emptied and left `active` at index a
                    }
                } else {
                    i += 1;
                }
            }
            if self.active.get(a).is_some_and(|&x| x as usize == g) {
                a += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_jobs_on_one_server_each_run_at_half_speed() {
        let mut s = Sharing::new(1, 1, false);
        s.advance(0.0);
        s.add(1, 0, 1.0);
        s.add(2, 0, 3.0);
        // Both at rate 1/2: job 1 done at t = 2, having left job 2 with 2 s of work.
        let t = s.next_completion(0.0).unwrap();
        assert!((t - 2.0).abs() < 1e-12);
        s.advance(t);
        let mut done = Vec::new();
        s.take_done(t, &mut done);
        assert_eq!(done, [1]);
        // Alone, job 2 finishes its 2 s at full speed.
        let t2 = s.next_completion(t).unwrap();
        assert!((t2 - 4.0).abs() < 1e-12);
    }

    #[test]
    fn a_lock_lets_one_job_of_a_process_compute_at_a_time() {
        // Two cores; process 0 has two jobs, process 1 one: each process gets a core, so
        // process 0's jobs run at 1/2 and process 1's at 1.
        let mut s = Sharing::new(2, 2, true);
        s.add(10, 0, 1.0);
        s.add(11, 0, 1.0);
        s.add(20, 1, 1.0);
        let t = s.next_completion(0.0).unwrap();
        assert!((t - 1.0).abs() < 1e-12);
        assert_eq!(s.busy_servers(), 2.0);
        s.advance(t);
        let mut done = Vec::new();
        s.take_done(t, &mut done);
        assert_eq!(done, [20]);
        // Without a lock the three jobs would share two cores at 2/3 each.
        let mut free = Sharing::new(2, 2, false);
        free.add(10, 0, 1.0);
        free.add(11, 0, 1.0);
        free.add(20, 1, 1.0);
        assert!((free.next_completion(0.0).unwrap() - 1.5).abs() < 1e-12);
    }

    #[test]
    fn a_slowdown_divides_every_rate() {
        let mut s = Sharing::new(1, 1, false);
        s.add(1, 0, 1.0);
        s.set_slowdown(4.0);
        assert!((s.next_completion(0.0).unwrap() - 4.0).abs() < 1e-12);
    }
}
