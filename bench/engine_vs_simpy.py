#!/usr/bin/env python3
"""Benchmark: dynosim's compiled engine against the same system written in SimPy.

The system is the seed study's (scenarios/rapgenius.toml): Poisson arrivals at 9000 req/min,
service times from the published percentile table, 75 single-slot dynos. For each routing
policy (random, intelligent, power_of_d with d=2) this script

1. runs the scenario through the compiled engine (``dynosim._dynosim.run``) with one
   replication, so on one core, and measures simulated requests per second of wall time;
2. runs the same system written idiomatically in SimPy for a shorter simulated time and
   measures the same figure;
3. prints, as a check that both simulate the same system, the fraction of requests that
   waited and the mean queue time from each (and the M/G/1 value for random routing);
4. prints a table of req/s and the speed-up (the median over pairs of consecutive runs of
   dynosim's rate over SimPy's), the machine, and the command to reproduce.

    python bench/engine_vs_simpy.py [--simulated-minutes M] [--simpy-minutes M] [--json out.json]

Wall time is taken with time.perf_counter around the whole ``_dynosim.run`` call (scenario
parsing, thread start-up, the report's JSON included); the engine's own ``wall_seconds`` is
shown beside it. The slower of the two is the headline figure. By default the process is
pinned to one CPU (os.sched_setaffinity) so that "per core" holds for both simulators; the
process CPU time is reported too as a check.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import random
import shlex
import statistics
import sys
from pathlib import Path
from statistics import NormalDist

import simpy

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

from machine import fmt_rate, machine_info, one_cpu, timed

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SCENARIO = REPO / "python" / "dynosim" / "scenarios" / "rapgenius.toml"
POLICIES = ("random", "intelligent", "power_of_d")
POWER_OF_D = 2

# The targets the project publishes.
TARGET_REQ_PER_S = 5_000_000
TARGET_SPEEDUP = 300


# --------------------------------------------------------------------------------------------
# Scenario file
# --------------------------------------------------------------------------------------------

_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0,
               "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration(value) -> float:
    """Seconds from "46ms", "5min" or a bare number of seconds (the subset rapgenius.toml uses)."""
    if isinstance(value, (int, float)):
        return float(value)
    text = value.strip()
    i = len(text)
    while i > 0 and not (text[i - 1].isdigit() or text[i - 1] == "."):
        i -= 1
    number, unit = text[:i], text[i:].strip()
    return float(number) * (_TIME_UNITS[unit] if unit else 1.0)


def parse_rate(value) -> float:
    """Requests per second from "9000/min", "150/s" or a bare number."""
    if isinstance(value, (int, float)):
        return float(value)
    number, _, per = value.partition("/")
    return float(number) / (_TIME_UNITS[per.strip()] if per else 1.0)


def load_scenario(path: Path) -> dict:
    with open(path, "rb") as f:
        return tomllib.load(f)


def engine_scenario_json(doc: dict, policy: str, minutes: float) -> str:
    doc = json.loads(json.dumps(doc))  # a deep copy
    doc["router"]["policy"] = policy
    doc["router"].pop("d", None)
    if policy == "power_of_d":
        doc["router"]["d"] = POWER_OF_D
    doc["run"]["replications"] = 1
    doc["run"]["warmup"] = 0
    doc["run"]["duration"] = f"{minutes:g}min"
    return json.dumps(doc)


# --------------------------------------------------------------------------------------------
# The SimPy model
# --------------------------------------------------------------------------------------------


class PercentileTable:
    """Service times from a percentile table, interpolated as the engine does: ln(time) is
    linear in z = Φ⁻¹(p) between the given percentiles, the end segments' lines extended
    beyond them. A sample is z ~ N(0, 1) mapped through that piecewise line."""

    def __init__(self, percentiles):
        normal = NormalDist()
        self.z = [normal.inv_cdf(pct / 100.0) for pct, _ in percentiles]
        ln_t = [math.log(parse_duration(t)) for _, t in percentiles]
        # Segment i covers [z[i], z[i+1]]: ln t = a + b z.
        self.lines = []
        for i in range(len(self.z) - 1):
            b = (ln_t[i + 1] - ln_t[i]) / (self.z[i + 1] - self.z[i])
            self.lines.append((ln_t[i] - b * self.z[i], b))

    def sample(self, rng: random.Random) -> float:
        z = rng.gauss(0.0, 1.0)
        k = min(max(bisect.bisect_right(self.z, z), 1), len(self.lines))
        a, b = self.lines[k - 1]
        return math.exp(a + b * z)


class Stats:
    def __init__(self):
        self.requests = 0
        self.waited = 0
        self.wait_sum = 0.0
        self.service_sum = 0.0


def customer(env, dyno, service_time, stats):
    """One request: wait for a slot on its dyno (or, intelligent routing, on any dyno), then
    hold it for its service time."""
    arrival = env.now
    with dyno.request() as slot:
        yield slot
        wait = env.now - arrival
        stats.requests += 1
        stats.service_sum += service_time
        stats.wait_sum += wait
        if wait > 0:
            stats.waited += 1
        yield env.timeout(service_time)


def load(dyno):
    return len(dyno.queue) + dyno.count


def source(env, rate, until, route, service, rng, stats):
    """Poisson arrivals until `until`; each request is routed when it arrives."""
    while True:
        yield env.timeout(rng.expovariate(rate))
        if env.now >= until:
            return
        env.process(customer(env, route(), service.sample(rng), stats))


def simpy_run(policy: str, rate: float, dynos: int, service: PercentileTable,
              seconds: float, seed: int) -> Stats:
    rng = random.Random(seed)
    env = simpy.Environment()
    stats = Stats()
    if policy == "intelligent":
        # One global FIFO queue in front of every slot: M/G/c.
        fleet = simpy.Resource(env, capacity=dynos)

        def route():
            return fleet
    else:
        fleet = [simpy.Resource(env, capacity=1) for _ in range(dynos)]
        if policy == "random":
            def route():
                return rng.choice(fleet)
        elif policy == "power_of_d":
            def route():
                # The first draw wins ties, as in the engine.
                return min(rng.sample(fleet, POWER_OF_D), key=load)
        else:
            raise ValueError(policy)
    env.process(source(env, rate, seconds, route, service, rng, stats))
    env.run()  # until every request that arrived before `seconds` has finished
    return stats


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------




def bench_engine(_dynosim, doc, base_dir, policy, minutes, repeats):
    scenario = engine_scenario_json(doc, policy, minutes)
    runs = []
    report = None
    for _ in range(repeats):
        text, wall, cpu = timed(lambda: _dynosim.run(scenario, base_dir))
        report = json.loads(text)
        simulated = sum(r["simulated_requests"] for r in report["per_replication"])
        engine_wall = report["wall_seconds"]
        runs.append({
            "simulated_requests": simulated,
            "call_seconds": wall,
            "engine_wall_seconds": engine_wall,
            "cpu_seconds": cpu,
            # The headline: the larger of the two wall-time figures.
            "req_per_s": simulated / max(wall, engine_wall),
            "engine_req_per_s": simulated / engine_wall,
        })
    summary = report["summary"]
    return {
        "simulated_minutes": minutes,
        "engine": report["engine"],
        "runs": runs,
        "queued_fraction": summary["queued_fraction"]["mean"],
        "queue_mean": summary["queue"]["mean"]["mean"],
        "service_mean_sampled": summary["service_mean"]["mean"],
        "service_mean_model": report["service_mean"],
        "offered_load": report["offered_load"],
    }


def bench_simpy(policy, rate, dynos, service, minutes, repeats, seed):
    runs = []
    stats = None
    for _ in range(repeats):
        stats, wall, cpu = timed(lambda: simpy_run(policy, rate, dynos, service, minutes * 60, seed))
        runs.append({
            "simulated_requests": stats.requests,
            "call_seconds": wall,
            "cpu_seconds": cpu,
            "req_per_s": stats.requests / wall,
        })
    return {
        "simulated_minutes": minutes,
        "seed": seed,
        "runs": runs,
        "queued_fraction": stats.waited / stats.requests,
        "queue_mean": stats.wait_sum / stats.requests,
        "service_mean_sampled": stats.service_sum / stats.requests,
    }


def best_median(runs, key="req_per_s"):
    xs = [r[key] for r in runs]
    return max(xs), statistics.median(xs)


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------








def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--simulated-minutes", type=float, default=600.0,
                    help="simulated time per dynosim run (default 600 = 5.4M requests, about "
                    "1 s: long enough that the call's fixed costs, such as the binding's 20 ms "
                    "polling for Ctrl-C, do not dominate)")
    ap.add_argument("--simpy-minutes", type=float, default=5.0,
                    help="simulated time per SimPy run (default 5 = 45k requests)")
    ap.add_argument("--repeats", type=int, default=9,
                    help="timed runs of each, taking turns (default 9)")
    ap.add_argument("--policies", default=",".join(POLICIES),
                    help="comma-separated subset of " + ",".join(POLICIES))
    ap.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO)
    ap.add_argument("--seed", type=int, default=2013, help="SimPy's random seed")
    ap.add_argument("--no-pin", action="store_true",
                    help="do not pin the process to one CPU")
    ap.add_argument("--json", type=Path, help="write every figure to this file")
    args = ap.parse_args(argv)

    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    for p in policies:
        if p not in POLICIES:
            ap.error(f"unknown policy {p!r}; expected some of {', '.join(POLICIES)}")

    pinned = one_cpu(args.no_pin)

    from dynosim import _dynosim  # the compiled module; imported after pinning

    doc = load_scenario(args.scenario)
    base_dir = str(args.scenario.resolve().parent)
    rate = parse_rate(doc["arrivals"]["rate"])
    dynos = int(doc["fleet"]["dynos"])
    assert doc["arrivals"]["process"] == "poisson"
    assert doc["service"]["distribution"] == "quantiles"
    assert int(doc["fleet"].get("slots", 1)) == 1
    assert int(doc["router"].get("routers", 1)) == 1
    service = PercentileTable(doc["service"]["percentiles"])

    command = " ".join(shlex.quote(a) for a in ["python", *sys.argv])
    machine = machine_info(pinned, simpy=simpy.__version__,
                           dynosim_engine=getattr(_dynosim, "__version__", None))
    print(f"machine: {machine['cpu']} (platform.processor={machine['platform.processor']!r}), "
          f"os.cpu_count={machine['os.cpu_count']}, "
          + (f"pinned to CPU {pinned}" if pinned is not None else "not pinned"))
    print(f"         {machine['platform']}; load average at start "
          + (" ".join(f"{x:.2f}" for x in machine["loadavg_at_start"])
             if machine["loadavg_at_start"] else "n/a"))
    print(f"python {machine['python']} ({machine['python_implementation']}), simpy {machine['simpy']}, "
          f"dynosim {machine['dynosim_engine']} ({machine['dynosim_build']} build), "
          f"git {machine['git']}")
    print(f"scenario: {args.scenario} ({rate:g} req/s Poisson, {dynos} single-slot dynos); "
          f"dynosim {args.simulated_minutes:g} simulated min/run, SimPy {args.simpy_minutes:g}, "
          f"{args.repeats} runs each, warm-up 0")
    print()

    results = {}
    for policy in policies:
        label = policy + (f"(d={POWER_OF_D})" if policy == "power_of_d" else "")
        print(f"[{label}] dynosim and SimPy, taking turns ...", end="", flush=True)
        # Taking turns, so that both see the same machine: a shared VM's speed drifts.
        eng = sp = None
        for _ in range(args.repeats):
            e = bench_engine(_dynosim, doc, base_dir, policy, args.simulated_minutes, 1)
            s_ = bench_simpy(policy, rate, dynos, service, args.simpy_minutes, 1, args.seed)
            if eng is None:
                eng, sp = e, s_
            else:
                eng["runs"] += e["runs"]
                sp["runs"] += s_["runs"]
        print(f" {fmt_rate(best_median(eng['runs'])[1])} req/s ({eng['engine']} engine) vs "
              f"{fmt_rate(best_median(sp['runs'])[1])} req/s; same simulated time as SimPy ...",
              end="", flush=True)
        # The engine again over SimPy's simulated time, to compare metrics like for like.
        eng_short = bench_engine(_dynosim, doc, base_dir, policy, args.simpy_minutes, 1)
        print(" done")
        results[policy] = {"label": label, "dynosim": eng, "dynosim_same_time": eng_short,
                           "simpy": sp}

    # Theory for random routing: each dyno is an M/G/1 queue with arrival rate λ/n.
    theory = None
    try:
        desc = json.loads(_dynosim.describe(engine_scenario_json(doc, "random", 5), base_dir))
        lam = rate / dynos
        theory = {
            "random": {"queued_fraction": lam * desc["service_mean"],
                       "queue_mean": _dynosim.mg1_mean_wait(lam, desc["service_mean"],
                                                            desc["service_second_moment"])},
            "service_mean": desc["service_mean"],
            "service_second_moment": desc["service_second_moment"],
        }
    except Exception as e:  # the check is a bonus; the benchmark does not depend on it
        print(f"(no theory figures: {e})")

    print()
    print("Sanity check: the same system? (warm-up 0, one run each; SimPy seed "
          f"{args.seed})")
    hdr = (f"{'policy':<16} {'source':<28} {'requests':>10} {'queued':>8} "
           f"{'mean queue':>11} {'mean service':>13}")
    print(hdr)
    print("-" * len(hdr))
    for policy, r in results.items():
        rows = [
            (f"dynosim {r['dynosim']['simulated_minutes']:g} min", r["dynosim"]),
            (f"dynosim {r['dynosim_same_time']['simulated_minutes']:g} min",
             r["dynosim_same_time"]),
            (f"SimPy {r['simpy']['simulated_minutes']:g} min", r["simpy"]),
        ]
        for i, (src, x) in enumerate(rows):
            print(f"{r['label'] if i == 0 else '':<16} {src:<28} "
                  f"{x['runs'][-1]['simulated_requests']:>10,} {x['queued_fraction']:>8.4f} "
                  f"{x['queue_mean']:>10.4f}s {x['service_mean_sampled'] * 1e3:>10.1f} ms")
        if theory and policy in theory:
            t = theory[policy]
            print(f"{'':<16} {'theory (M/G/1 per dyno)':<28} {'':>10} {t['queued_fraction']:>8.4f} "
                  f"{t['queue_mean']:>10.4f}s {theory['service_mean'] * 1e3:>10.1f} ms")
    print("(queue times have heavy tails: a few simulated minutes give only a rough estimate)")

    print()
    print("Throughput: simulated requests per second of wall time, one core "
          f"(median of {args.repeats}; best in brackets).")
    print("Speed-up: dynosim's rate over SimPy's in each pair of consecutive runs; the median "
          "pair, and the lowest and highest pairs in brackets.")
    hdr = (f"{'policy':<16} {'dynosim req/s':>24} {'SimPy req/s':>22} {'speed-up':>20}"
           f"  {'dynosim cpu/wall':>16}")
    print(hdr)
    print("-" * len(hdr))
    table = []
    for policy, r in results.items():
        e_best, e_med = best_median(r["dynosim"]["runs"])
        s_best, s_med = best_median(r["simpy"]["runs"])
        cpu_ratio = statistics.median(x["cpu_seconds"] / x["call_seconds"]
                                      for x in r["dynosim"]["runs"])
        # Paired: the two runs of a pair are seconds apart and see the same machine, whose
        # speed drifts by tens of per cent over minutes; so the ratio within a pair varies
        # less than either rate. The ratio of the two medians is kept for comparison.
        pairs = [e["req_per_s"] / s["req_per_s"]
                 for e, s in zip(r["dynosim"]["runs"], r["simpy"]["runs"])]
        speedup = statistics.median(pairs)
        table.append({"policy": r["label"], "dynosim_req_per_s_median": e_med,
                      "dynosim_req_per_s_best": e_best, "simpy_req_per_s_median": s_med,
                      "simpy_req_per_s_best": s_best, "speedup_paired_median": speedup,
                      "speedup_paired_min": min(pairs), "speedup_paired_max": max(pairs),
                      "speedup_pairs": pairs, "speedup_of_medians": e_med / s_med,
                      "speedup_of_bests": e_best / s_best, "dynosim_cpu_over_wall": cpu_ratio})
        print(f"{r['label']:<16} {fmt_rate(e_med):>10} ({fmt_rate(e_best):>9}) "
              f"{fmt_rate(s_med):>9} ({fmt_rate(s_best):>9}) "
              f"{speedup:>6.0f}× ({min(pairs):>4.0f}–{max(pairs):<4.0f}×)  {cpu_ratio:>16.2f}")
    print()
    print("dynosim req/s = simulated requests / max(perf_counter around _dynosim.run, "
          "engine wall_seconds);")
    print("engine-internal figure alone (median): " + ", ".join(
        f"{r['label']} {fmt_rate(statistics.median(x['engine_req_per_s'] for x in r['dynosim']['runs']))}"
        for r in results.values()))
    print(f"targets: >= {TARGET_REQ_PER_S / 1e6:g} M req/s per core: "
          + ", ".join(f"{t['policy']} {'met' if t['dynosim_req_per_s_median'] >= TARGET_REQ_PER_S else 'NOT met'}"
                      for t in table))
    print(f"         >= {TARGET_SPEEDUP}× SimPy: "
          + ", ".join(f"{t['policy']} {'met' if t['speedup_paired_median'] >= TARGET_SPEEDUP else 'NOT met'}"
                      for t in table))
    print()
    if hasattr(os, "getloadavg"):
        machine["loadavg_at_end"] = os.getloadavg()
        print("load average at end: " + " ".join(f"{x:.2f}" for x in machine["loadavg_at_end"])
              + " (other work on the machine slows both simulators)")
    print(f"reproduce (from {REPO}): {command}")

    if args.json:
        out = {"command": command, "machine": machine, "scenario": str(args.scenario),
               "settings": {"simulated_minutes": args.simulated_minutes,
                            "simpy_minutes": args.simpy_minutes, "repeats": args.repeats,
                            "seed": args.seed, "power_of_d": POWER_OF_D},
               "table": table, "theory": theory, "results": results,
               "targets": {"req_per_s_per_core": TARGET_REQ_PER_S, "speedup": TARGET_SPEEDUP}}
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
