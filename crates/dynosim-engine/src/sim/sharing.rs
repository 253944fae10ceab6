//! Processor sharing: the jobs on a set of servers (a dyno's cores, a database's servers)
//! share them, each runnable job getting min(1, servers / jobs) of a server. With an
//! interpreter lock, the jobs are grouped by process and at most one job of a process computes
//! at a time: each process with runnable jobs gets min(1, servers / processes) of a server,
//! split evenly between its jobs (a lock handed round much faster than a CPU phase lasts).
//! A slowdown factor (memory over quota) divides every rate.
//!
//! The state changes only when a job joins or leaves, or the slowdown changes: then the work
//! done since the last change is taken off each job and the next completion is scheduled
//! anew, the previous one cancelled by keeping only the new one's key
//! ([`crate::kernel::EventKey`]).

use crate::kernel::EventKey;

#[derive(Debug, Clone, Copy)]
pub struct Job {
    pub req: u32,
    pub group: u32,
    pub remaining: f64,
    rate: f64,
}

#[derive(Debug, Clone)]
pub struct Sharing {
    pub jobs: Vec<Job>,
    last: f64,
    /// The key of the one completion event wanted (None: none pending).
    pub pending: Option<EventKey>,
    /// When the pending completion event is due (None: none pending).
    pub scheduled: Option<f64>,
    /// The job (its request) that completes first, as of the last [`Self::next_completion`]:
    /// rates change only there, so the order of completions holds until it is called again.
    soonest: u32,
    /// Runnable jobs per group (only with a lock).
    per_group: Vec<u32>,
    active_groups: u32,
    servers: f64,
    lock: bool,
    slowdown: f64,
    /// Each group's own slowdown (malloc arena contention), when any is set.
    group_factor: Vec<f64>,
}

impl Sharing {
    pub fn new(servers: u32, groups: u32, lock: bool) -> Self {
        Sharing {
            jobs: Vec::new(),
            last: 0.0,
            pending: None,
            scheduled: None,
            soonest: u32::MAX,
            per_group: if lock {
                vec![0; groups as usize]
            } else {
                Vec::new()
            },
            active_groups: 0,
            servers: f64::from(servers),
            lock,
            slowdown: 1.0,
            group_factor: Vec::new(),
        }
    }

    /// Sets a group's own slowdown; true when it changed (then advance first, and
    /// reschedule after).
    pub fn set_group_factor(&mut self, group: u32, factor: f64, groups: u32) -> bool {
        if self.group_factor.is_empty() {
            if factor == 1.0 {
                return false;
            }
            self.group_factor = vec![1.0; groups as usize];
        }
        let f = &mut self.group_factor[group as usize];
        let changed = *f != factor;
        *f = factor;
        changed
    }

    /// Servers in use now.
    pub fn busy_servers(&self) -> f64 {
        let runnable = if self.lock {
            self.active_groups
        } else {
            self.jobs.len() as u32
        };
        f64::from(runnable).min(self.servers)
    }

    /// Takes the work done since the last change off every job; returns the server-seconds
    /// used over that span (for utilisation) and when it began.
    pub fn advance(&mut self, now: f64) -> (f64, f64) {
        let dt = now - self.last;
        let from = self.last;
        self.last = now;
        if dt <= 0.0 || self.jobs.is_empty() {
            return (0.0, from);
        }
        for j in &mut self.jobs {
            j.remaining -= j.rate * dt;
        }
        (self.busy_servers() * dt, from)
    }

    /// Adds a job (after [`Self::advance`]).
    pub fn add(&mut self, req: u32, group: u32, work: f64) {
        if self.lock {
            let g = &mut self.per_group[group as usize];
            if *g == 0 {
                self.active_groups += 1;
            }
            *g += 1;
        }
        self.jobs.push(Job {
            req,
            group,
            remaining: work,
            rate: 0.0,
        });
    }

    fn forget(&mut self, group: u32) {
        if self.lock {
            let g = &mut self.per_group[group as usize];
            *g -= 1;
            if *g == 0 {
                self.active_groups -= 1;
            }
        }
    }

    /// Removes a job wherever it is (a request killed with its dyno); after [`Self::advance`].
    pub fn remove(&mut self, req: u32) -> bool {
        if let Some(i) = self.jobs.iter().position(|j| j.req == req) {
            let job = self.jobs.remove(i);
            self.forget(job.group);
            true
        } else {
            false
        }
    }

    pub fn set_slowdown(&mut self, slowdown: f64) -> bool {
        let changed = slowdown != self.slowdown;
        self.slowdown = slowdown;
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

    /// Sets every job's rate and returns when the next one completes (None with no jobs).
    pub fn next_completion(&mut self, now: f64) -> Option<f64> {
        if self.jobs.is_empty() {
            return None;
        }
        let mut soonest = f64::INFINITY;
        let mut first = u32::MAX;
        let n = self.jobs.len() as f64;
        let share = if self.lock {
            (self.servers / f64::from(self.active_groups)).min(1.0) / self.slowdown
        } else {
            (self.servers / n).min(1.0) / self.slowdown
        };
        for j in &mut self.jobs {
            j.rate = if self.lock {
                share / f64::from(self.per_group[j.group as usize])
            } else {
                share
            };
            if let Some(f) = self.group_factor.get(j.group as usize) {
                j.rate /= f;
            }
            let t = j.remaining.max(0.0) / j.rate;
            if t < soonest {
                soonest = t;
                first = j.req;
            }
        }
        self.soonest = first;
        Some(now + soonest)
    }

    /// Takes out the jobs done at `now` (after [`Self::advance`]): those whose remaining work
    /// is within rounding of zero, and at least the one that was due. Their requests are
    /// appended to `done` in the order the jobs joined.
    pub fn take_done(&mut self, now: f64, done: &mut Vec<u32>) {
        // What the clock can resolve at `now`, in work: a few ulps of the time.
        let eps = (now.abs() * 8.0 * f64::EPSILON).max(1e-15);
        let soonest = self.soonest;
        let mut i = 0;
        while i < self.jobs.len() {
            let j = self.jobs[i];
            if j.remaining <= eps * j.rate.max(1e-300) || j.req == soonest {
                done.push(j.req);
                self.forget(j.group);
                self.jobs.remove(i);
            } else {
                i += 1;
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
