//! Time slices: a dyno's cores shared as Linux shares them, and each process's interpreter
//! lock handed over as CPython and CRuby hand theirs (`fleet.cpu_sharing = "slices"`, the
//! default; docs/dyno.md, "The scheduler"; the facts are in ../shared/docs/SCHEDULERS.md).
//!
//! Two layers. A request's CPU phase is a **job** of its thread.
//!
//! 1. **The lock of its process** (`app.lock`). Only the holder's thread may run; the others
//!    wait, using no CPU, in the process's FIFO of waiters.
//!    - `gil` (CPython): a thread finding the lock free takes it at once. When a thread
//!      starts waiting and no drop is pending, a timer of `app.switch_interval` starts; when
//!      it fires the holder drops the lock at once if it is on a core (the eval breaker),
//!      else as soon as the OS runs it again. The first waiter takes it; the dropped holder
//!      joins the waiters' tail (FORCE_SWITCHING: it cannot win the lock back first). A new
//!      holder with waiters behind it gets a fresh interval.
//!    - `gvl` (CRuby): FIFO with direct hand-off. While threads wait, the timer thread ticks
//!      every 10 ms; the holder yields at the tick that brings its ticks since it took the
//!      lock to `app.timeslice` (100 ms), to the tail of the queue.
//!    - `none`: every thread with CPU work is runnable.
//!    - An async process (gevent) is one OS thread running its greenlets one at a time to
//!      the end of each CPU phase: a FIFO with no timer, whatever the lock.
//!
//!    A thread back from IO, or starting a request, queues for the lock like any other.
//! 2. **The cores**, shared fairly, as Linux's scheduler shares them, each with its own run
//!    queue. The threads allowed to run (holders, and every thread without a lock) have a
//!    virtual runtime, their time on a core. A thread that wakes (a CPU phase starts, a lock
//!    is granted) goes to the core its process's thread last ran on if that is idle, else to
//!    an idle core, else to that last core's queue (wake-affine; a thread new to the dyno:
//!    the shortest queue), placed at that core's least virtual runtime (CFS's min_vruntime,
//!    which never goes back). A free core takes the least virtual runtime of its queue
//!    (EEVDF's earliest deadline with equal slices; the longest waiting among equals), or,
//!    its queue empty, pulls one from the longest other queue (new-idle balancing). While a
//!    core's queue holds threads, its running one is preempted at the end of its slice of
//!    `fleet.cpu_quantum` and the least virtual runtime runs next; with none waiting nobody
//!    is preempted, and a thread's slices are counted from when it took its core. A woken
//!    thread waits for the current slice to end (EEVDF's RUN_TO_PARITY). Lock time is wall
//!    time: a holder preempted by the OS keeps its lock, and its waiters' timer runs on.
//!
//!    Why this and not one first-in-first-out queue (docs/testbed.md, "The scheduler against
//!    the real stack"): with constant phases, 4 sync workers on one core keep their CPU
//!    phases largely in step on the real stack (48-58 req/s, near lockstep's 49); a FIFO
//!    queue let them drift apart every time (68-70), the fair queue stays in step with some
//!    runs' calibration and not with others' (51.5-66.0: an edge). With one fair queue for
//!    all cores, 8 workers on 2 cores stayed in step too (102 req/s) where the real ones
//!    drift apart (138-140); a queue per core gives 156.
//!
//! A router on the dyno's machine (`router.colocated_cpu`) is one more thread, of no process:
//! it takes no lock, is no request's, and ends nothing when it is done ([`COLOCATED`]). Work
//! given it while it has some left is added to what it has (one thread, doing one request's
//! work after another).
//!
//! A running job's work left is worked out from when it took its core: its work then, less
//! the time since over its delay (the dyno's slowdown times its process's own). Events come
//! only from what is running and from armed timers: one pending event a dyno, at the
//! earliest of its running jobs' ends, their slices' ends (only while others wait) and its
//! processes' lock timers. An uncontended dyno costs no event more than processor sharing.

use crate::app::{Lock, GVL_TICK};
use std::collections::VecDeque;
use std::mem::size_of;

/// No request.
const NONE: u32 = u32::MAX;

/// The process of the router's thread on the dyno's machine (`router.colocated_cpu`): none
/// of the app's, so it has no lock; its job's request is [`NONE`].
pub(super) const COLOCATED: u32 = u32::MAX;

/// The rules every dyno of a fleet follows.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rules {
    cores: usize,
    quantum: f64,
    lock: Lock,
    /// An async process: one OS thread, its jobs run one at a time to their end.
    cooperative: bool,
    switch_interval: f64,
    /// The GVL's timeslice in whole ticks (at least 1).
    ticks_per_slice: u32,
}

impl Rules {
    pub fn new(
        cores: u32,
        quantum: f64,
        lock: Lock,
        cooperative: bool,
        switch_interval: f64,
        timeslice: f64,
    ) -> Rules {
        Rules {
            cores: cores.max(1) as usize,
            quantum,
            lock,
            cooperative,
            switch_interval,
            ticks_per_slice: ((timeslice / GVL_TICK) - 1e-9).ceil().max(1.0) as u32,
        }
    }

    /// Whether a process's threads take turns at all.
    #[inline]
    fn locked(&self) -> bool {
        self.cooperative || self.lock != Lock::None
    }

    /// Whether the lock is taken from its holder by a timer.
    #[inline]
    fn timed(&self) -> bool {
        !self.cooperative && self.lock != Lock::None
    }
}

#[derive(Debug, Clone, Copy)]
struct Job {
    req: u32,
    process: u32,
    /// Work left (seconds at full speed) as of when it last stopped running.
    work: f64,
    /// Its virtual runtime (seconds on a core) as of then; set when it wakes.
    v: f64,
}

#[derive(Debug, Clone, Copy)]
struct Running {
    job: Job,
    /// When it took its core (its `work` is as of then).
    since: f64,
    /// When its current slice began.
    slice_start: f64,
    /// Wall seconds per second of work: the dyno's slowdown times its process's factor.
    delay: f64,
    /// The core it runs on.
    core: u32,
}

impl Running {
    #[inline]
    fn v(&self, now: f64) -> f64 {
        self.job.v + (now - self.since)
    }

    #[inline]
    fn end(&self) -> f64 {
        self.since + self.job.work * self.delay
    }

    #[inline]
    fn left(&self, now: f64) -> f64 {
        (self.job.work - (now - self.since) / self.delay).max(0.0)
    }
}

#[derive(Debug, Clone)]
struct Process {
    /// The lock's holder (NONE: free).
    holder: u32,
    waiters: VecDeque<Job>,
    /// When the lock's timer fires (infinite: not armed).
    timer: f64,
    /// The GVL's ticks since the holder took it.
    ticks: u32,
    /// The holder must drop the lock as soon as it runs (it was not on a core when asked).
    drop_pending: bool,
    /// The process's own slowdown (malloc arena contention).
    factor: f64,
    /// The core its thread last ran on (NONE: none yet): where it wakes (Linux's wake-affine).
    last_core: u32,
}

/// One dyno's cores and its processes' locks.
#[derive(Debug, Clone)]
pub(super) struct Slicer {
    running: Vec<Running>,
    /// Each core's run queue: the threads waiting for it.
    queues: Vec<VecDeque<Job>>,
    /// The threads in all run queues. None waiting (the common case where few threads
    /// want to run) skips the slices' and the free cores' bookkeeping altogether.
    waiting: u32,
    procs: Vec<Process>,
    /// Processes whose timer is armed.
    armed: u32,
    /// Each core's least virtual runtime of its threads (never going back), as of the last
    /// wake-up there: where a waking thread is placed.
    vmin: Vec<f64>,
    slowdown: f64,
    last: f64,
    /// When the pending event is due (NaN: none).
    scheduled: f64,
    /// The request the next event expects to end first (NONE: a slice, a timer, or the
    /// router's thread).
    soonest: u32,
    /// The core the router's thread last ran on (NONE: none yet).
    colocated_core: u32,
}

/// What counts as "at the same time" at `now`: a few ulps.
#[inline]
fn due(t: f64, now: f64) -> bool {
    t <= now + now.abs() * 1e-12
}

impl Slicer {
    pub fn new(processes: u32, cores: u32) -> Slicer {
        Slicer {
            running: Vec::new(),
            queues: vec![VecDeque::new(); cores.max(1) as usize],
            waiting: 0,
            procs: vec![
                Process {
                    holder: NONE,
                    waiters: VecDeque::new(),
                    timer: f64::INFINITY,
                    ticks: 0,
                    drop_pending: false,
                    factor: 1.0,
                    last_core: NONE,
                };
                processes.max(1) as usize
            ],
            armed: 0,
            vmin: vec![0.0; cores.max(1) as usize],
            slowdown: 1.0,
            last: 0.0,
            scheduled: f64::NAN,
            soonest: NONE,
            colocated_core: NONE,
        }
    }

    /// The scheduler's invariants (debug builds): no core idles while a thread waits for
    /// one; a lock with waiters has a holder, which is running or waits for a core; a lock
    /// nobody waits for has no timer.
    fn check(&self, rules: &Rules) {
        if !cfg!(debug_assertions) {
            return;
        }
        debug_assert!(self.running.len() <= rules.cores);
        let waiting: usize = self.queues.iter().map(VecDeque::len).sum();
        debug_assert_eq!(waiting, self.waiting as usize);
        debug_assert!(waiting == 0 || self.running.len() == rules.cores);
        for (i, r) in self.running.iter().enumerate() {
            debug_assert!(
                self.running[..i].iter().all(|o| o.core != r.core),
                "a core twice"
            );
        }
        let mut armed = 0;
        for (p, proc) in self.procs.iter().enumerate() {
            armed += u32::from(proc.timer.is_finite());
            if proc.waiters.is_empty() {
                debug_assert!(!proc.timer.is_finite(), "process {p}: a timer, no waiter");
            } else {
                debug_assert!(proc.holder != NONE, "process {p}: waiters, no holder");
            }
            if proc.holder != NONE {
                let there = self.running.iter().any(|r| r.job.req == proc.holder)
                    || self.queues.iter().flatten().any(|j| j.req == proc.holder);
                debug_assert!(
                    there,
                    "process {p}: its holder is neither running nor ready"
                );
            }
        }
        debug_assert_eq!(armed, self.armed);
    }

    /// What a dyno's scheduler holds, bytes, before any job (jobs are counted per slot).
    pub fn bytes(processes: u32, cores: u32) -> f64 {
        (size_of::<Slicer>()
            + processes.max(1) as usize * size_of::<Process>()
            + cores.max(1) as usize * (size_of::<VecDeque<Job>>() + size_of::<f64>()))
            as f64
    }

    /// Cores in use now.
    #[inline]
    pub fn busy(&self) -> f64 {
        self.running.len() as f64
    }

    /// Moves on to `now`; returns the cores in use since the last change (0 if none or no
    /// span) and when that began.
    #[inline]
    pub fn advance(&mut self, now: f64) -> (f64, f64) {
        let from = self.last;
        self.last = now;
        if now > from {
            (self.busy(), from)
        } else {
            (0.0, from)
        }
    }

    #[inline]
    pub fn soonest(&self) -> u32 {
        self.soonest
    }

    #[inline]
    pub fn set_scheduled(&mut self, at: Option<f64>) {
        self.scheduled = at.unwrap_or(f64::NAN);
    }

    /// Whether an event at `t` is not the pending one already.
    #[inline]
    pub fn needs_event(&self, t: f64) -> bool {
        super::sharing::off_schedule(self.scheduled, t)
    }

    /// Wall seconds per second of a job's work: the dyno's slowdown (memory over quota slows
    /// everything on the machine) times its process's own (malloc arenas: the app's only).
    #[inline]
    fn delay(&self, process: u32) -> f64 {
        if process == COLOCATED {
            return self.slowdown;
        }
        self.slowdown * self.procs[process as usize].factor
    }

    /// The core a process's thread (or the router's) last ran on: where it wakes.
    #[inline]
    fn last_core(&self, process: u32) -> u32 {
        if process == COLOCATED {
            return self.colocated_core;
        }
        self.procs[process as usize].last_core
    }

    fn set_timer(&mut self, p: usize, at: f64) {
        let was = self.procs[p].timer.is_finite();
        self.procs[p].timer = at;
        match (was, at.is_finite()) {
            (false, true) => self.armed += 1,
            (true, false) => self.armed -= 1,
            _ => {}
        }
    }

    /// A CPU phase of `work` seconds starts on a thread of process `process`.
    pub fn add(&mut self, rules: &Rules, req: u32, process: u32, work: f64, now: f64) {
        let job = Job {
            req,
            process,
            work,
            v: 0.0,
        };
        if !rules.locked() {
            self.wake(rules, job, now);
            return;
        }
        let p = process as usize;
        if self.procs[p].holder == NONE {
            debug_assert!(self.procs[p].waiters.is_empty());
            self.procs[p].holder = req;
            self.procs[p].ticks = 0;
            self.wake(rules, job, now);
        } else {
            self.procs[p].waiters.push_back(job);
            if rules.timed() && !self.procs[p].timer.is_finite() && !self.procs[p].drop_pending {
                let at = match rules.lock {
                    Lock::Gil => now + rules.switch_interval,
                    _ => now + GVL_TICK,
                };
                self.set_timer(p, at);
            }
        }
        self.check(rules);
    }

    /// The router's thread on the dyno's machine gets `work` more to do: it wakes, or, if
    /// it has work left (running or waiting for a core), does this after it. It takes no
    /// lock, and its end is no request's.
    pub fn add_colocated(&mut self, rules: &Rules, work: f64, now: f64) {
        if work <= 0.0 {
            return;
        }
        if let Some(r) = self.running.iter_mut().find(|r| r.job.process == COLOCATED) {
            r.job.work += work;
        } else if let Some(j) = self
            .queues
            .iter_mut()
            .flatten()
            .find(|j| j.process == COLOCATED)
        {
            j.work += work;
        } else {
            let job = Job {
                req: NONE,
                process: COLOCATED,
                work,
                v: 0.0,
            };
            self.wake(rules, job, now);
        }
        self.check(rules);
    }

    /// The router's thread drops the work it has left (its dyno went down: the requests it
    /// was for failed or were answered, their connections closed).
    pub fn remove_colocated(&mut self, rules: &Rules, now: f64) {
        if let Some(i) = self.running.iter().position(|r| r.job.process == COLOCATED) {
            self.running.remove(i);
        } else if let Some((k, i)) = (0..self.queues.len()).find_map(|k| {
            self.queues[k]
                .iter()
                .position(|j| j.process == COLOCATED)
                .map(|i| (k, i))
        }) {
            self.take_at(k, i);
        }
        self.dispatch(rules, now);
        self.check(rules);
    }

    /// Whether core `k` runs nothing.
    #[inline]
    fn idle(&self, k: usize) -> bool {
        !self.running.iter().any(|r| r.core as usize == k)
    }

    /// Core `k`'s least virtual runtime (its min_vruntime, which never goes back).
    fn vmin_of(&mut self, k: usize, now: f64) -> f64 {
        let least = self
            .running
            .iter()
            .filter(|r| r.core as usize == k)
            .map(|r| r.v(now))
            .chain(self.queues[k].iter().map(|j| j.v))
            .fold(f64::INFINITY, f64::min);
        if least.is_finite() {
            self.vmin[k] = self.vmin[k].max(least);
        }
        self.vmin[k]
    }

    /// A thread may run. It goes to a core as Linux's wake-up does: the core its process's
    /// thread last ran on if that is idle, else an idle core, else that last core's run queue
    /// (wake-affine; a thread new to the dyno: the shortest queue). There it is placed at the
    /// core's least virtual runtime (min_vruntime), and runs at once on an idle core or waits.
    /// (A core may be free while its queue is not, within a change, before the next dispatch:
    /// then the thread waits too.)
    fn wake(&mut self, rules: &Rules, mut job: Job, now: f64) {
        let cores = self.queues.len();
        let last = self.last_core(job.process) as usize;
        let free = |s: &Self, k: usize| s.idle(k) && s.queues[k].is_empty();
        let target = if last < cores && free(self, last) {
            Some(last)
        } else {
            (0..cores).find(|&k| free(self, k))
        };
        if let Some(k) = target {
            job.v = self.vmin_of(k, now);
            self.start(rules, job, k, now);
            return;
        }
        let k = if last < cores {
            last
        } else {
            (0..cores)
                .min_by_key(|&k| self.queues[k].len())
                .expect("a core")
        };
        job.v = self.vmin_of(k, now);
        if self.queues[k].is_empty() {
            // Somebody waits for core k from now on: the current slice ends its thread's run.
            for r in self.running.iter_mut().filter(|r| r.core as usize == k) {
                let slices = ((now - r.slice_start) / rules.quantum).floor();
                if slices >= 1.0 {
                    r.slice_start += slices * rules.quantum;
                }
            }
        }
        self.push_ready(k, job);
    }

    /// Job `job` waits in core `k`'s run queue.
    #[inline]
    fn push_ready(&mut self, k: usize, job: Job) {
        self.queues[k].push_back(job);
        self.waiting += 1;
    }

    /// Takes the job at `i` out of core `k`'s run queue.
    #[inline]
    fn take_at(&mut self, k: usize, i: usize) -> Option<Job> {
        let job = self.queues[k].remove(i);
        self.waiting -= u32::from(job.is_some());
        job
    }

    /// A thread takes core `k`; a holder asked to drop its lock drops it first (the core
    /// stays free).
    fn start(&mut self, rules: &Rules, job: Job, k: usize, now: f64) {
        let p = job.process as usize;
        if job.process == COLOCATED {
            self.colocated_core = k as u32;
        } else {
            self.procs[p].last_core = k as u32;
        }
        if rules.locked()
            && job.process != COLOCATED
            && self.procs[p].drop_pending
            && self.procs[p].holder == job.req
        {
            self.procs[p].drop_pending = false;
            self.hand_over(rules, job, now);
            return;
        }
        let delay = self.delay(job.process);
        self.running.push(Running {
            job,
            since: now,
            slice_start: now,
            delay,
            core: k as u32,
        });
    }

    /// The waiting thread of least virtual runtime in queue `k` (the longest waiting among
    /// equals), taken out.
    fn take_least(&mut self, k: usize) -> Option<Job> {
        let q = &self.queues[k];
        let mut best = 0;
        for (i, j) in q.iter().enumerate().skip(1) {
            if j.v < q[best].v {
                best = i;
            }
        }
        self.take_at(k, best)
    }

    /// Free cores take the least virtual runtime of their own queue; a free core whose queue
    /// is empty pulls one from the longest other queue (Linux's new-idle balancing), its
    /// virtual runtime moved to this core's scale.
    fn dispatch(&mut self, rules: &Rules, now: f64) {
        // Nobody waits: no core has anything to take.
        if self.waiting == 0 {
            return;
        }
        loop {
            let mut moved = false;
            for k in 0..self.queues.len() {
                if !self.idle(k) {
                    continue;
                }
                let job = if !self.queues[k].is_empty() {
                    self.take_least(k)
                } else {
                    let from = (0..self.queues.len())
                        .filter(|&j| j != k)
                        .max_by_key(|&j| (self.queues[j].len(), std::cmp::Reverse(j)))
                        .filter(|&j| !self.queues[j].is_empty());
                    match from {
                        Some(j) => {
                            let base = self.vmin_of(j, now);
                            let here = self.vmin_of(k, now);
                            self.take_least(j).map(|job| Job {
                                v: job.v - base + here,
                                ..job
                            })
                        }
                        None => None,
                    }
                };
                if let Some(job) = job {
                    self.start(rules, job, k, now);
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
    }

    /// Process `p`'s lock goes to `job`'s thread, which may then run.
    fn grant(&mut self, rules: &Rules, p: usize, job: Job, now: f64) {
        let proc = &mut self.procs[p];
        proc.holder = job.req;
        proc.ticks = 0;
        proc.drop_pending = false;
        let timer = if proc.waiters.is_empty() || !rules.timed() {
            f64::INFINITY
        } else {
            match rules.lock {
                // The drop deadline counts from the grant.
                Lock::Gil => now + rules.switch_interval,
                // The timer thread keeps ticking on its own phase.
                _ if proc.timer.is_finite() => proc.timer,
                _ => now + GVL_TICK,
            }
        };
        self.set_timer(p, timer);
        self.wake(rules, job, now);
    }

    /// The holder of process `p`'s lock lets it go (its CPU phase ended or it left).
    fn release(&mut self, rules: &Rules, p: usize, now: f64) {
        self.procs[p].holder = NONE;
        self.procs[p].drop_pending = false;
        match self.procs[p].waiters.pop_front() {
            Some(next) => self.grant(rules, p, next, now),
            None => {
                self.procs[p].ticks = 0;
                self.set_timer(p, f64::INFINITY);
            }
        }
    }

    /// The holder `job` was made to drop its lock: it waits at the tail, the first waiter
    /// takes the lock.
    fn hand_over(&mut self, rules: &Rules, job: Job, now: f64) {
        let p = job.process as usize;
        self.procs[p].waiters.push_back(job);
        let next = self.procs[p].waiters.pop_front().expect("a waiter");
        self.grant(rules, p, next, now);
    }

    /// Takes running job `i` off its core, its work brought up to date.
    fn preempt(&mut self, i: usize, now: f64) -> Job {
        let r = self.running.remove(i);
        Job {
            work: r.left(now),
            v: r.v(now),
            ..r.job
        }
    }

    /// Process `p`'s lock timer fires.
    fn fire(&mut self, rules: &Rules, p: usize, now: f64) {
        let force = match rules.lock {
            Lock::Gil => {
                self.set_timer(p, f64::INFINITY);
                true
            }
            _ => {
                self.set_timer(p, now + GVL_TICK);
                let proc = &mut self.procs[p];
                proc.ticks += 1;
                proc.ticks >= rules.ticks_per_slice && !proc.drop_pending
            }
        };
        if !force || self.procs[p].waiters.is_empty() {
            if self.procs[p].waiters.is_empty() {
                self.set_timer(p, f64::INFINITY);
            }
            return;
        }
        let holder = self.procs[p].holder;
        if let Some(i) = self.running.iter().position(|r| r.job.req == holder) {
            let job = self.preempt(i, now);
            self.hand_over(rules, job, now);
        } else {
            // In the run queue: it drops the lock when the OS runs it.
            self.procs[p].drop_pending = true;
            if rules.lock == Lock::Gil {
                self.set_timer(p, f64::INFINITY);
            }
        }
    }

    /// When the next thing happens (None: nothing will until a change).
    pub fn next_event(&mut self, rules: &Rules) -> Option<f64> {
        let mut next = f64::INFINITY;
        self.soonest = NONE;
        let waiting = self.waiting > 0;
        for r in &self.running {
            let end = r.end();
            if end < next {
                next = end;
                self.soonest = r.job.req;
            }
            // A slice ends a run only while somebody waits for its core.
            if waiting && !self.queues[r.core as usize].is_empty() {
                let slice_end = r.slice_start + rules.quantum;
                if slice_end < next {
                    next = slice_end;
                    self.soonest = NONE;
                }
            }
        }
        if self.armed > 0 {
            for proc in &self.procs {
                if proc.timer < next {
                    next = proc.timer;
                    self.soonest = NONE;
                }
            }
        }
        next.is_finite().then_some(next)
    }

    /// Does everything due at `now` (after [`Self::advance`]): jobs that end (their requests
    /// appended to `done`), lock timers, slices that end; then free cores take the next.
    pub fn take_done(&mut self, rules: &Rules, now: f64, done: &mut Vec<u32>) {
        loop {
            let mut changed = false;
            let mut i = 0;
            while i < self.running.len() {
                if due(self.running[i].end(), now) {
                    let r = self.running.remove(i);
                    // The router's thread ends no request and holds no lock.
                    if r.job.process != COLOCATED {
                        done.push(r.job.req);
                        if rules.locked() {
                            self.release(rules, r.job.process as usize, now);
                        }
                    }
                    changed = true;
                } else {
                    i += 1;
                }
            }
            if !changed && self.armed > 0 {
                if let Some(p) = self.procs.iter().position(|p| due(p.timer, now)) {
                    self.fire(rules, p, now);
                    changed = true;
                }
            }
            if !changed && self.waiting > 0 {
                let q = rules.quantum;
                if let Some(i) = self.running.iter().position(|r| {
                    !self.queues[r.core as usize].is_empty() && due(r.slice_start + q, now)
                }) {
                    let core = self.running[i].core as usize;
                    let job = self.preempt(i, now);
                    self.push_ready(core, job);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
            self.dispatch(rules, now);
        }
        self.check(rules);
    }

    /// The work a job has left, or None if it is not here.
    pub fn remaining(&self, req: u32, now: f64) -> Option<f64> {
        if let Some(r) = self.running.iter().find(|r| r.job.req == req) {
            return Some(r.left(now));
        }
        self.queues
            .iter()
            .flatten()
            .chain(self.procs.iter().flat_map(|p| p.waiters.iter()))
            .find(|j| j.req == req)
            .map(|j| j.work)
    }

    /// Removes a job wherever it is (its request was killed); after [`Self::advance`].
    pub fn remove(&mut self, rules: &Rules, req: u32, now: f64) -> bool {
        let process = if let Some(i) = self.running.iter().position(|r| r.job.req == req) {
            self.running.remove(i).job.process
        } else if let Some((k, i)) = (0..self.queues.len()).find_map(|k| {
            self.queues[k]
                .iter()
                .position(|j| j.req == req)
                .map(|i| (k, i))
        }) {
            self.take_at(k, i).expect("found").process
        } else {
            for p in 0..self.procs.len() {
                if let Some(i) = self.procs[p].waiters.iter().position(|j| j.req == req) {
                    self.procs[p].waiters.remove(i);
                    if self.procs[p].waiters.is_empty() {
                        self.set_timer(p, f64::INFINITY);
                        self.procs[p].drop_pending = false;
                    }
                    return true;
                }
            }
            return false;
        };
        if rules.locked() && self.procs[process as usize].holder == req {
            self.release(rules, process as usize, now);
        }
        self.dispatch(rules, now);
        self.check(rules);
        true
    }

    /// Brings the running jobs' work up to date and gives them `delay`s anew.
    fn restart_clocks(&mut self, now: f64, process: Option<u32>) {
        for i in 0..self.running.len() {
            let r = self.running[i];
            if process.is_some_and(|p| p != r.job.process) {
                continue;
            }
            let delay = self.delay(r.job.process);
            let run = &mut self.running[i];
            run.job.work = r.left(now);
            run.since = now;
            run.delay = delay;
        }
    }

    /// Sets the dyno's slowdown (memory over quota); true when it changed.
    pub fn set_slowdown(&mut self, slowdown: f64, now: f64) -> bool {
        if slowdown == self.slowdown {
            return false;
        }
        self.slowdown = slowdown;
        self.restart_clocks(now, None);
        true
    }

    /// Sets a process's own slowdown; true when it changed.
    pub fn set_group_factor(&mut self, process: u32, factor: f64, now: f64) -> bool {
        if self.procs[process as usize].factor == factor {
            return false;
        }
        self.procs[process as usize].factor = factor;
        self.restart_clocks(now, Some(process));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs jobs added at time 0 to their ends; returns (request, end) in order.
    fn run(rules: &Rules, jobs: &[(u32, u32, f64)]) -> Vec<(u32, f64)> {
        let mut s = Slicer::new(4, rules.cores as u32);
        for &(req, p, work) in jobs {
            s.add(rules, req, p, work, 0.0);
        }
        let mut ends = Vec::new();
        let mut done = Vec::new();
        while let Some(t) = s.next_event(rules) {
            s.advance(t);
            s.take_done(rules, t, &mut done);
            ends.extend(done.drain(..).map(|r| (r, t)));
            assert!(ends.len() <= jobs.len() && t < 1e3);
        }
        ends
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn threads_take_turns_in_slices_only_when_more_want_to_run_than_there_are_cores() {
        // One core, quantum 1 ms, no lock: two 2.5 ms jobs alternate 1 ms slices.
        let rules = Rules::new(1, 0.001, Lock::None, false, 0.005, 0.1);
        let ends = run(&rules, &[(1, 0, 0.0025), (2, 1, 0.0025)]);
        // 1: 0-1, 2: 1-2, 1: 2-3, 2: 3-4, 1: 4-4.5 done, 2: 4.5-5 done.
        assert_eq!(ends.len(), 2);
        assert!(close(ends[0].1, 0.0045) && ends[0].0 == 1, "{ends:?}");
        assert!(close(ends[1].1, 0.005) && ends[1].0 == 2, "{ends:?}");
        // Two cores: no slicing, each ends at its own work.
        let rules = Rules::new(2, 0.001, Lock::None, false, 0.005, 0.1);
        let ends = run(&rules, &[(1, 0, 0.0025), (2, 1, 0.003)]);
        assert!(
            close(ends[0].1, 0.0025) && close(ends[1].1, 0.003),
            "{ends:?}"
        );
    }

    #[test]
    fn the_gil_goes_to_a_waiter_after_the_switch_interval() {
        // Two threads of one process on two cores: only the holder runs. The waiter asks
        // after 5 ms; they then swap every 5 ms.
        let rules = Rules::new(2, 0.003, Lock::Gil, false, 0.005, 0.1);
        let ends = run(&rules, &[(1, 0, 0.012), (2, 0, 0.004)]);
        // 1: 0-5, 2: 5-9 done (voluntary release), 1: 9-16 done.
        assert!(close(ends[0].1, 0.009) && ends[0].0 == 2, "{ends:?}");
        assert!(close(ends[1].1, 0.016) && ends[1].0 == 1, "{ends:?}");
    }

    #[test]
    fn the_gvl_is_held_for_its_timeslice_in_ticks_then_handed_in_fifo_order() {
        let rules = Rules::new(4, 0.003, Lock::Gvl, false, 0.005, 0.1);
        // Three threads of one process: 1 holds 100 ms (10 ticks), then 2, then 3; each
        // needs 150 ms.
        let ends = run(&rules, &[(1, 0, 0.15), (2, 0, 0.15), (3, 0, 0.15)]);
        // 1: 0-100, 2: 100-200, 3: 200-300, 1: 300-350 done, 2: 350-400, 3: 400-450.
        let order: Vec<u32> = ends.iter().map(|e| e.0).collect();
        assert_eq!(order, vec![1, 2, 3], "{ends:?}");
        assert!(close(ends[0].1, 0.35) && close(ends[2].1, 0.45), "{ends:?}");
        // A 25 ms timeslice rounds up to 3 ticks.
        let rules = Rules::new(4, 0.003, Lock::Gvl, false, 0.005, 0.025);
        let ends = run(&rules, &[(1, 0, 0.04), (2, 0, 0.01)]);
        assert!(close(ends[0].1, 0.04) && ends[0].0 == 2, "{ends:?}");
    }

    #[test]
    fn an_async_process_runs_its_jobs_one_at_a_time_to_their_ends() {
        let rules = Rules::new(4, 0.003, Lock::Gil, true, 0.005, 0.1);
        let ends = run(&rules, &[(1, 0, 0.02), (2, 0, 0.01), (3, 1, 0.001)]);
        assert_eq!(ends.iter().map(|e| e.0).collect::<Vec<_>>(), vec![3, 1, 2]);
        assert!(close(ends[1].1, 0.02) && close(ends[2].1, 0.03), "{ends:?}");
    }

    /// Ends `light` (work `work`, process 0) added at `at` beside a CPU hog of process 0 that
    /// has held the lock since 0; returns its end.
    fn beside_a_hog(rules: &Rules, at: f64, work: f64) -> f64 {
        let mut s = Slicer::new(1, rules.cores as u32);
        let mut done = Vec::new();
        s.add(rules, 1, 0, 1e3, 0.0);
        s.advance(at);
        s.add(rules, 2, 0, work, at);
        loop {
            let t = s.next_event(rules).expect("an event");
            s.advance(t);
            s.take_done(rules, t, &mut done);
            if done.contains(&2) {
                return t;
            }
            assert!(t < at + 10.0);
        }
    }

    #[test]
    fn a_thread_back_from_io_waits_a_switch_interval_for_a_gil_a_hog_holds() {
        // bpo-7946's convoy, sized by dask/distributed#5450: each reacquisition beside a
        // CPU-bound thread costs one interval, so an IO thread is capped at 1/interval.
        let rules = Rules::new(4, 0.003, Lock::Gil, false, 0.005, 0.1);
        let end = beside_a_hog(&rules, 1.0, 1e-5);
        assert!(close(end, 1.0 + 0.005 + 1e-5), "{end}");
        let rules = Rules::new(4, 0.003, Lock::Gil, false, 0.001, 0.1);
        assert!(close(beside_a_hog(&rules, 1.0, 1e-5), 1.0 + 0.001 + 1e-5));
    }

    #[test]
    fn a_thread_back_from_io_waits_out_the_gvl_holder_s_timeslice() {
        // Feature #20861: the sleeping thread "waiting for fib's quantum to finish": the
        // holder yields 10 ticks (100 ms) after the waiter came, at the timer's ticks.
        let rules = Rules::new(4, 0.003, Lock::Gvl, false, 0.005, 0.1);
        let end = beside_a_hog(&rules, 1.0, 1e-5);
        assert!(close(end, 1.1 + 1e-5), "{end}");
        // RUBY_THREAD_TIMESLICE=10: one tick.
        let rules = Rules::new(4, 0.003, Lock::Gvl, false, 0.005, 0.01);
        assert!(close(beside_a_hog(&rules, 1.0, 1e-5), 1.01 + 1e-5));
    }

    #[test]
    fn the_router_s_thread_shares_the_cores_takes_no_lock_and_ends_no_request() {
        // One core, quantum 1 ms, a GIL: request 1 (2.5 ms) holds the lock; the router's
        // thread (1.5 ms) is runnable beside it all the same, and they alternate slices.
        let rules = Rules::new(1, 0.001, Lock::Gil, false, 0.005, 0.1);
        let mut s = Slicer::new(1, 1);
        s.add(&rules, 1, 0, 0.0025, 0.0);
        s.add_colocated(&rules, 0.001, 0.0);
        // More work for it while it waits is done after, by the same thread.
        s.add_colocated(&rules, 0.0005, 0.0);
        let (mut done, mut ends) = (Vec::new(), Vec::new());
        while let Some(t) = s.next_event(&rules) {
            s.advance(t);
            s.take_done(&rules, t, &mut done);
            ends.extend(done.drain(..).map(|r| (r, t)));
            assert!(t < 1.0);
        }
        // 1: 0-1, router: 1-2, 1: 2-3, router: 3-3.5 done, 1: 3.5-4 done. Only the request
        // is reported, and the core never idled: 4 ms of work in 4 ms.
        assert_eq!(ends.len(), 1, "{ends:?}");
        assert!(ends[0].0 == 1 && close(ends[0].1, 0.004), "{ends:?}");
        assert_eq!(s.busy(), 0.0);
        // Alone on an idle dyno, it runs at once and leaves nothing behind.
        let mut s = Slicer::new(1, 2);
        s.add_colocated(&rules, 0.002, 0.0);
        assert_eq!(s.busy(), 1.0);
        assert!(close(s.next_event(&rules).expect("its end"), 0.002));
        s.advance(0.002);
        s.take_done(&rules, 0.002, &mut done);
        assert!(done.is_empty() && s.busy() == 0.0);
        assert!(s.next_event(&rules).is_none());
    }

    #[test]
    fn a_holder_preempted_by_the_os_keeps_its_lock() {
        // One core, two processes: 1 (process 0) and 2 (process 1) alternate 1 ms slices;
        // 3 (process 0) waits for the GIL, asks after 5 ms, and gets it when 1 next runs.
        let rules = Rules::new(1, 0.001, Lock::Gil, false, 0.005, 0.1);
        let ends = run(&rules, &[(1, 0, 0.010), (2, 1, 0.010), (3, 0, 0.001)]);
        let order: Vec<u32> = ends.iter().map(|e| e.0).collect();
        assert_eq!(order[0], 3, "{ends:?}");
        // Work is conserved: the core never idles while work is left.
        assert!(close(ends.last().expect("ends").1, 0.021), "{ends:?}");
    }
}
