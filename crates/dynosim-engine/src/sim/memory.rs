//! A dyno's memory: each request a process holds, and each malloc arena it makes, adds to it.
//! Over the dyno's quota (R14) its CPU work slows down (`app.swap_slowdown`); at
//! `app.restart_at` times the quota (R15) the dyno restarts ([`super::lifecycle`]). Threads
//! sharing too few arenas slow a process's CPU work too (`app.arena_contention`). The fleet's
//! totals (busy processes, memory, dynos over quota) are reported to the observer from here.
//! (What a run's state costs the machine that simulates it is [`crate::state_size`], not this.)

use super::Simulation;

impl Simulation<'_> {
    /// A process's busy threads or arenas changed: its CPU work's contention for malloc
    /// arenas (see [`crate::app::Memory::contention`]).
    pub(super) fn contention(&mut self, dyno: usize, process: u32) {
        let m = &self.s.app.memory;
        if m.arena_contention == 0.0 {
            return;
        }
        let proc = self.procs.of(dyno, process);
        let factor = m.contention(proc.busy, 1 + proc.arenas);
        self.cpu_advance(dyno);
        if self.cpu_set_group_factor(dyno, process, factor) {
            self.reschedule_cpu(dyno);
        }
    }

    pub(super) fn fleet_levels(&mut self) {
        self.measures.fleet_levels(
            self.now,
            f64::from(self.busy_processes),
            self.fleet_memory,
            f64::from(self.over_quota),
        );
    }

    /// A dyno's memory changed by `delta` bytes: R14 slows its CPU, R15 restarts it.
    pub(super) fn memory_changed(&mut self, dyno: usize, delta: f64) {
        let m = &self.s.app.memory;
        let memory = &mut self.rest.memory[dyno];
        let was_over = *memory > m.quota;
        *memory += delta;
        let bytes = *memory;
        self.fleet_memory += delta;
        let over = bytes > m.quota;
        if over != was_over {
            if over {
                self.over_quota += 1;
            } else {
                self.over_quota -= 1;
            }
        }
        self.measures.dyno_memory(self.now, bytes);
        self.fleet_levels();
        if bytes >= m.restart_at {
            self.restart(dyno);
            return;
        }
        if self.phases {
            let slowdown = m.slowdown(bytes);
            self.cpu_advance(dyno);
            if self.cpu_set_slowdown(dyno, slowdown) {
                self.reschedule_cpu(dyno);
            }
        }
    }
}
