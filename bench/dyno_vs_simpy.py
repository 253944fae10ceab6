#!/usr/bin/env python3
"""Benchmark: dynosim's dyno model (threads, interpreter lock, processor-shared cores, a
database) against the same system written in SimPy.

The system (issue #10 §9, "a two-phase cpu + db scenario with threads under a lock"):

- Poisson arrivals at 4000 req/s, routed at random to 20 dynos;
- each dyno has 2 cores and 3 processes of 5 threads with an interpreter lock, and one accept
  queue its processes share (a new request goes to the process holding the fewest; a freed
  thread takes the head of the accept queue);
- a request's phases: cpu (exponential, mean 4 ms), then a query on the app's database
  (exponential, mean 10 ms; 60 servers, first come first served, no pool), then cpu
  (exponential, mean 2 ms);
- the cores are shared by processor sharing under the lock (docs/dyno.md): each process with
  runnable work gets min(1, cores / such processes) of a core, split evenly between its
  runnable threads. With 3 processes on 2 cores both halves of the rule matter: processes
  contend for cores, and a process's threads share its one core at a time.

Offered load: 0.6 of the cores, 0.667 of the database's servers (the bottleneck).
3 processes rather than puma's 2 so that the processes contend for the cores: with
processes <= cores each process would simply be a processor-sharing server of its own.

For this scenario the script

1. runs it through the compiled engine (``dynosim._dynosim.run``, JSON scenario, one
   replication, so on one core; the event-driven engine, the only one that runs phases) and
   measures simulated requests per second of wall time;
2. runs the same system written in SimPy (``simpy_run`` below) for a shorter simulated time
   and measures the same figure;
3. prints, as a check that both simulate the same system, the mean response time, mean queue
   time (accept queue), queued fraction, CPU and database utilisation of each;
4. prints req/s of both and the speed-up: the median over pairs of consecutive runs of
   dynosim's rate over SimPy's, the lowest and highest pair beside it; the machine and the
   command to reproduce.

    python bench/dyno_vs_simpy.py [--simulated-seconds S] [--simpy-seconds S] [--repeats N]
                                  [--json out.json]

How the SimPy model does processor sharing. A dyno's CPU (class ``Cpu``) keeps its runnable
jobs (remaining work, process) and is told when a job joins (``Cpu.run`` returns an event
that succeeds when the job's work is done). At each change it takes the work done since the
last change off every job at the rates that held, sets the new rates by the rule above, and
schedules one timeout for the soonest completion; a generation counter makes the previously
scheduled timeout stale (its callback returns at once). This is exact processor sharing (no
time slice): the same event-rescheduling scheme as the engine, which is the natural way to
write PS on SimPy's event list (a time slice of q would cost 1/q events per second of work
and be exact only as q -> 0). The rest is plain SimPy: a request is a process; a dyno's
threads are a ``simpy.Resource`` of processes x threads (its queue is the accept queue, FIFO),
the request then takes the process holding the fewest requests; the database is a
``simpy.Resource`` with one unit per server.

Wall time for dynosim is perf_counter around the whole ``_dynosim.run`` call (JSON parsing,
thread start-up, the report), or the engine's own ``wall_seconds`` if larger. The process is
pinned to one CPU (os.sched_setaffinity) unless --no-pin.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import statistics
import sys
from pathlib import Path

import simpy

from machine import fmt_rate, machine_info, one_cpu, timed

REPO = Path(__file__).resolve().parent.parent

# The targets of issue #10 §9.
TARGET_REQ_PER_S = 1_000_000
TARGET_SPEEDUP = 100


class System:
    """The scenario's parameters, shared by both models."""

    def __init__(self, args):
        self.rate = args.rate
        self.dynos = args.dynos
        self.cores = args.cores
        self.processes = args.processes
        self.threads = args.threads
        self.lock = not args.no_lock
        self.cpu1 = args.cpu1_ms / 1e3
        self.db = args.db_ms / 1e3
        self.cpu2 = args.cpu2_ms / 1e3
        self.db_servers = args.db_servers
        self.cpu_sharing = getattr(args, "cpu_sharing", "ps")
        # Connections for the whole app in front of the database (None: no pool; the SimPy
        # model has none, so only bench/slices_vs_ps.py sets it).
        self.pool = getattr(args, "pool", None)

    def engine_scenario(self, seconds: float, seed: int = 1) -> str:
        exp = lambda mean: {"distribution": "exponential", "mean": mean}  # noqa: E731
        return json.dumps({
            "arrivals": {"process": "poisson", "rate": self.rate},
            "request": {"phases": [
                {"cpu": exp(self.cpu1)},
                {"use": "db", "time": exp(self.db)},
                {"cpu": exp(self.cpu2)},
            ]},
            "resources": {"db": {"servers": self.db_servers, "discipline": "fcfs",
                                 **({"pool": {"size": self.pool, "per": "app"}}
                                    if self.pool else {})}},
            # The SimPy model below is processor sharing (bench/slices_vs_ps.py times the
            # engine's time slices against it).
            "fleet": {"dynos": self.dynos, "cores": self.cores, "cpu_sharing": self.cpu_sharing},
            "router": {"policy": "random"},
            "app": {"server": "generic", "model": "threaded", "processes": self.processes,
                    "threads": self.threads, "lock": self.lock},
            "run": {"duration": seconds, "warmup": 0, "replications": 1, "seed": seed,
                    "engine": "auto"},
        })

    def describe(self) -> str:
        return (f"{self.rate:g} req/s Poisson, random routing to {self.dynos} dynos of "
                f"{self.cores} cores, {self.processes} processes x {self.threads} threads"
                f"{' with a lock' if self.lock else ', no lock'}; phases cpu exp "
                f"{self.cpu1 * 1e3:g} ms, db exp {self.db * 1e3:g} ms ({self.db_servers} "
                f"servers, FCFS{f', a pool of {self.pool} for the app' if self.pool else ''}), "
                f"cpu exp {self.cpu2 * 1e3:g} ms")


# --------------------------------------------------------------------------------------------
# The SimPy model
# --------------------------------------------------------------------------------------------


class Cpu:
    """A dyno's cores, shared by processor sharing; with a lock, each process with runnable
    work gets min(1, cores / such processes) of a core, split evenly between its runnable
    threads. Exact: rates change only when a job joins or leaves; at each change the work done
    is taken off and the soonest completion scheduled anew (older timeouts go stale)."""

    __slots__ = ("env", "cores", "lock", "jobs", "per_process", "active", "last",
                 "generation", "busy_area")

    def __init__(self, env, cores, processes, lock):
        self.env = env
        self.cores = float(cores)
        self.lock = lock
        self.jobs = []  # [remaining work, process, event, rate]
        self.per_process = [0] * processes
        self.active = 0  # processes with runnable work
        self.last = 0.0
        self.generation = 0
        self.busy_area = 0.0  # core-seconds used

    def run(self, process, work):
        """An event that succeeds when `work` seconds of CPU have been done for `process`."""
        done = self.env.event()
        self._advance()
        self.jobs.append([work, process, done, 0.0])
        if self.per_process[process] == 0:
            self.active += 1
        self.per_process[process] += 1
        self._reschedule()
        return done

    def _advance(self):
        now = self.env.now
        dt = now - self.last
        self.last = now
        if dt > 0.0 and self.jobs:
            for job in self.jobs:
                job[0] -= job[3] * dt
            runnable = self.active if self.lock else len(self.jobs)
            self.busy_area += min(runnable, self.cores) * dt

    def _reschedule(self):
        self.generation += 1
        if not self.jobs:
            return
        if self.lock:
            share = min(1.0, self.cores / self.active)
            per_process = self.per_process
            for job in self.jobs:
                job[3] = share / per_process[job[1]]
        else:
            share = min(1.0, self.cores / len(self.jobs))
            for job in self.jobs:
                job[3] = share
        soonest = min(max(job[0], 0.0) / job[3] for job in self.jobs)
        generation = self.generation
        self.env.timeout(soonest).callbacks.append(
            lambda _event: self._complete(generation))

    def _complete(self, generation):
        if generation != self.generation:
            return  # stale: the jobs changed since this completion was scheduled
        self._advance()
        # The job that was due, and any other within rounding of done.
        soonest = min(self.jobs, key=lambda job: job[0] / job[3])
        keep = []
        for job in self.jobs:
            if job is soonest or job[0] <= 1e-12:
                p = job[1]
                self.per_process[p] -= 1
                if self.per_process[p] == 0:
                    self.active -= 1
                job[2].succeed()
            else:
                keep.append(job)
        self.jobs = keep
        self._reschedule()


class Dyno:
    __slots__ = ("threads", "held", "cpu")

    def __init__(self, env, system):
        # The accept queue is this resource's queue (FIFO).
        self.threads = simpy.Resource(env, capacity=system.processes * system.threads)
        self.held = [0] * system.processes
        self.cpu = Cpu(env, system.cores, system.processes, system.lock)

    def take_process(self):
        """The process holding the fewest requests (the lowest numbered among equals). When a
        freed thread takes the head of the accept queue, that is the freed thread's process:
        every other process has all its threads busy."""
        held = self.held
        p = held.index(min(held))
        held[p] += 1
        return p


class Stats:
    def __init__(self):
        self.requests = 0
        self.response_sum = 0.0
        self.queue_sum = 0.0
        self.queued = 0
        self.db_busy = 0.0


def request(env, dyno, db, cpu1, query, cpu2, stats):
    arrival = env.now
    with dyno.threads.request() as thread:
        yield thread
        started = env.now
        process = dyno.take_process()
        yield dyno.cpu.run(process, cpu1)
        with db.request() as server:
            yield server
            yield env.timeout(query)
        stats.db_busy += query
        yield dyno.cpu.run(process, cpu2)
        dyno.held[process] -= 1
    stats.requests += 1
    stats.response_sum += env.now - arrival
    wait = started - arrival
    stats.queue_sum += wait
    if wait > 0.0:
        stats.queued += 1


def source(env, system, until, dynos, db, rng, stats):
    expo = rng.expovariate
    n = len(dynos)
    while True:
        yield env.timeout(expo(system.rate))
        if env.now >= until:
            return
        # Phase times drawn on arrival, as the engine does.
        env.process(request(env, dynos[int(rng.random() * n)], db, expo(1.0 / system.cpu1),
                            expo(1.0 / system.db), expo(1.0 / system.cpu2), stats))


def simpy_run(system: System, seconds: float, seed: int):
    rng = random.Random(seed)
    env = simpy.Environment()
    stats = Stats()
    dynos = [Dyno(env, system) for _ in range(system.dynos)]
    db = simpy.Resource(env, capacity=system.db_servers)
    env.process(source(env, system, seconds, dynos, db, rng, stats))
    env.run()  # until every request that arrived before `seconds` has finished
    end = env.now
    for d in dynos:
        d.cpu._advance()
    stats.cpu_utilisation = (sum(d.cpu.busy_area for d in dynos)
                             / (system.cores * system.dynos * end))
    # FCFS: a query holds one server for its time.
    stats.db_utilisation = stats.db_busy / (system.db_servers * end)
    stats.end = end
    return stats


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------




def bench_engine(_dynosim, system, seconds, seed=1):
    scenario = system.engine_scenario(seconds, seed)
    text, wall, cpu = timed(lambda: _dynosim.run(scenario, "."))
    report = json.loads(text)
    rep = report["per_replication"][0]
    simulated = rep["simulated_requests"]
    engine_wall = report["wall_seconds"]
    return {
        "simulated_seconds": seconds,
        "engine": report["engine"],
        "offered_load": report["offered_load"],
        "simulated_requests": simulated,
        "call_seconds": wall,
        "engine_wall_seconds": engine_wall,
        "cpu_seconds": cpu,
        "req_per_s": simulated / max(wall, engine_wall),
        "engine_req_per_s": simulated / engine_wall,
        "figures": {
            "requests": simulated,
            "response_mean": rep["response"]["mean"],
            "queue_mean": rep["queue"]["mean"],
            "queued_fraction": rep["queued_fraction"],
            "cpu_utilisation": rep["dyno"]["cpu_utilisation"],
            "db_utilisation": rep["resources"]["db"]["utilisation"],
        },
    }


def bench_simpy(system, seconds, seed):
    stats, wall, cpu = timed(lambda: simpy_run(system, seconds, seed))
    n = stats.requests
    return {
        "simulated_seconds": seconds,
        "seed": seed,
        "simulated_requests": n,
        "call_seconds": wall,
        "cpu_seconds": cpu,
        "req_per_s": n / wall,
        "figures": {
            "requests": n,
            "response_mean": stats.response_sum / n,
            "queue_mean": stats.queue_sum / n,
            "queued_fraction": stats.queued / n,
            "cpu_utilisation": stats.cpu_utilisation,
            "db_utilisation": stats.db_utilisation,
        },
    }


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------










def print_machine(machine):
    print(f"machine: {machine['cpu']}, os.cpu_count={machine['os.cpu_count']}, "
          + (f"pinned to CPU {machine['pinned_to_cpu']}"
             if machine["pinned_to_cpu"] is not None else "not pinned"))
    print(f"         {machine['platform']}; load average at start "
          + (" ".join(f"{x:.2f}" for x in machine["loadavg_at_start"])
             if machine["loadavg_at_start"] else "n/a"))
    print(f"python {machine['python']} ({machine['python_implementation']}), "
          f"simpy {machine['simpy']}, dynosim {machine['dynosim_engine']} "
          f"({machine['dynosim_build']} build), git {machine['git']}")


def arg_parser() -> argparse.ArgumentParser:
    """The command line; its defaults are the benchmark's system (tools/pgo_train.py uses
    them too)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--simulated-seconds", type=float, default=600.0,
                    help="simulated time per dynosim run (default 600 = 2.4 M requests, "
                    "1.5-3 s)")
    ap.add_argument("--simpy-seconds", type=float, default=20.0,
                    help="simulated time per SimPy run (default 20 = 80 k requests, "
                    "about 5 s)")
    ap.add_argument("--check-seconds", type=float, default=150.0,
                    help="simulated time of the SimPy run for the same-system check, with "
                    "a second seed (default 150 = 600 k requests, about 40 s; 0 to skip)")
    ap.add_argument("--repeats", type=int, default=7,
                    help="timed pairs of runs, taking turns (default 7)")
    ap.add_argument("--seed", type=int, default=2026, help="SimPy's random seed")
    ap.add_argument("--rate", type=float, default=4000.0)
    ap.add_argument("--dynos", type=int, default=20)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--threads", type=int, default=5)
    ap.add_argument("--no-lock", action="store_true")
    ap.add_argument("--cpu1-ms", type=float, default=4.0)
    ap.add_argument("--db-ms", type=float, default=10.0)
    ap.add_argument("--cpu2-ms", type=float, default=2.0)
    ap.add_argument("--db-servers", type=int, default=60)
    ap.add_argument("--cpu-sharing", choices=["ps", "slices"], default="ps",
                    help="the engine's fleet.cpu_sharing (the SimPy model is ps)")
    ap.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU")
    ap.add_argument("--json", type=Path, help="write every figure to this file")
    return ap


def main(argv=None) -> int:
    args = arg_parser().parse_args(argv)

    pinned = one_cpu(args.no_pin)

    from dynosim import _dynosim  # the compiled module; imported after pinning

    system = System(args)
    command = " ".join(shlex.quote(a) for a in ["python", *sys.argv])
    machine = machine_info(pinned, simpy=simpy.__version__,
                           dynosim_engine=getattr(_dynosim, "__version__", None))
    print_machine(machine)
    print(f"scenario: {system.describe()}")
    print(f"dynosim {args.simulated_seconds:g} simulated s/run, SimPy {args.simpy_seconds:g}, "
          f"{args.repeats} pairs, warm-up 0")
    print()

    print("dynosim and SimPy, taking turns ", end="", flush=True)
    eng_runs, sp_runs = [], []
    for _ in range(args.repeats):
        eng_runs.append(bench_engine(_dynosim, system, args.simulated_seconds))
        sp_runs.append(bench_simpy(system, args.simpy_seconds, args.seed))
        print(".", end="", flush=True)
    print(" done")

    check = {"dynosim": eng_runs[-1],
             "dynosim_same_time": bench_engine(_dynosim, system, args.simpy_seconds),
             "simpy": sp_runs[-1]}
    if args.check_seconds > 0:
        print(f"SimPy over {args.check_seconds:g} simulated s for the check ...", end="",
              flush=True)
        check["simpy_long"] = bench_simpy(system, args.check_seconds, args.seed + 1)
        print(" done")

    print()
    print("Same system? (warm-up 0, one run each)")
    hdr = (f"{'source':<24} {'requests':>10} {'mean response':>14} {'mean queue':>11} "
           f"{'queued':>8} {'CPU util':>9} {'db util':>8}")
    print(hdr)
    print("-" * len(hdr))
    labels = {"dynosim": f"dynosim {args.simulated_seconds:g} s",
              "dynosim_same_time": f"dynosim {args.simpy_seconds:g} s",
              "simpy": f"SimPy {args.simpy_seconds:g} s",
              "simpy_long": f"SimPy {args.check_seconds:g} s"}
    for key, run in check.items():
        f = run["figures"]
        print(f"{labels[key]:<24} {f['requests']:>10,} {f['response_mean'] * 1e3:>11.3f} ms "
              f"{f['queue_mean'] * 1e3:>8.4f} ms {f['queued_fraction']:>8.4f} "
              f"{f['cpu_utilisation']:>9.4f} {f['db_utilisation']:>8.4f}")
    ref = check.get("simpy_long", check["simpy"])["figures"]["response_mean"]
    dev = check["dynosim"]["figures"]["response_mean"] / ref - 1.0
    print(f"mean response, dynosim {args.simulated_seconds:g} s against SimPy "
          f"{labels['simpy_long' if 'simpy_long' in check else 'simpy'].split()[1]}: "
          f"{dev * 100:+.2f}%")
    print(f"dynosim's offered load (busiest part): {eng_runs[-1]['offered_load']:.3f}")

    e_med = statistics.median(r["req_per_s"] for r in eng_runs)
    e_best = max(r["req_per_s"] for r in eng_runs)
    s_med = statistics.median(r["req_per_s"] for r in sp_runs)
    s_best = max(r["req_per_s"] for r in sp_runs)
    pairs = [e["req_per_s"] / s["req_per_s"] for e, s in zip(eng_runs, sp_runs)]
    speedup = statistics.median(pairs)
    cpu_ratio = statistics.median(r["cpu_seconds"] / r["call_seconds"] for r in eng_runs)
    print()
    print(f"Throughput: simulated requests per second of wall time, one core (median of "
          f"{args.repeats}; best in brackets). Speed-up: the median pair (lowest-highest).")
    print(f"  dynosim ({eng_runs[-1]['engine']} engine): {fmt_rate(e_med)} req/s "
          f"({fmt_rate(e_best)}); engine-internal {fmt_rate(statistics.median(r['engine_req_per_s'] for r in eng_runs))}; "
          f"process cpu/wall {cpu_ratio:.2f}")
    print(f"  SimPy: {fmt_rate(s_med)} req/s ({fmt_rate(s_best)})")
    print(f"  speed-up: {speedup:.0f}x ({min(pairs):.0f}-{max(pairs):.0f}x); ratio of medians "
          f"{e_med / s_med:.0f}x")
    print(f"targets: >= {TARGET_REQ_PER_S / 1e6:g} M req/s per core: "
          f"{'met' if e_med >= TARGET_REQ_PER_S else 'NOT met'}; >= {TARGET_SPEEDUP}x SimPy: "
          f"{'met' if speedup >= TARGET_SPEEDUP else 'NOT met'}")
    if hasattr(os, "getloadavg"):
        machine["loadavg_at_end"] = os.getloadavg()
        print("load average at end: " + " ".join(f"{x:.2f}" for x in machine["loadavg_at_end"]))
    print(f"reproduce (from {REPO}): {command}")

    if args.json:
        out = {"command": command, "machine": machine, "system": vars(system),
               "settings": {"simulated_seconds": args.simulated_seconds,
                            "simpy_seconds": args.simpy_seconds,
                            "check_seconds": args.check_seconds,
                            "repeats": args.repeats, "seed": args.seed},
               "dynosim_runs": eng_runs, "simpy_runs": sp_runs, "check": check,
               "summary": {"dynosim_req_per_s_median": e_med, "dynosim_req_per_s_best": e_best,
                           "simpy_req_per_s_median": s_med, "simpy_req_per_s_best": s_best,
                           "speedup_paired_median": speedup, "speedup_pairs": pairs,
                           "speedup_of_medians": e_med / s_med,
                           "response_mean_deviation": dev},
               "targets": {"req_per_s_per_core": TARGET_REQ_PER_S, "speedup": TARGET_SPEEDUP}}
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
