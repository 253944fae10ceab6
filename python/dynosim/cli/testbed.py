"""`dynosim testbed`: run a scenario for real (HAProxy in front of gunicorn dynos, PostgreSQL
behind them, all on loopback) and simulated, on the same requests, and compare. The testbed
itself is :mod:`dynosim.testbed`; this module parses, prints and writes.

``dynosim testbed replay FILE ...`` (a log against the real testbed under several app-server
configurations) has a parser and a module of its own, :mod:`.testbed_replay`: the testbed's
parser hands it every argument after ``replay``."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..display import Column, activity, results_table, stdout_console
from ..output import print_json, write_files
from ..results import is_time_metric, lookup
from . import testbed_replay
from .common import Parser, add_scenario_arguments, policy_list, policy_names, positive_int, scenario_from_args

#: The metrics of the side-by-side table, when the reports have them.
TABLE_METRICS = ["requests", "throughput", "queued_fraction", "queue.mean", "queue.p50", "queue.p90", "queue.p99",
                 "response.mean", "response.p50", "response.p99", "service_mean", "utilisation.mean",
                 "max_queue_depth.dyno", "failed.total", "errors.h12", "errors.queue_timeout", "errors.app_timeout",
                 "closed_loop.requests_per_s", "closed_loop.latency.mean", "closed_loop.latency.p99"]


class TestbedParser(Parser):
    """``dynosim testbed``'s parser: ``dynosim testbed replay ...`` is parsed by the replay's
    own parser (a scenario file named ``replay`` is ``./replay``)."""

    replay: argparse.ArgumentParser

    def parse_known_args(self, args: Optional[Sequence[str]] = None,  # type: ignore[override]
                         namespace: Optional[argparse.Namespace] = None) -> Tuple[argparse.Namespace, List[str]]:
        if args and list(args)[0] == "replay":
            return self.replay.parse_known_args(list(args)[1:], namespace)
        return super().parse_known_args(args, namespace)


def register(commands: argparse._SubParsersAction) -> None:
    help = "Run a scenario for real (HAProxy, gunicorn, PostgreSQL on loopback) and simulated, and compare."
    p = commands.add_parser(
        "testbed", help=help, description=help,
        usage="%(prog)s [SCENARIO] [options]\n       %(prog)s replay FILE... --config 'NAME: key=value ...' ...",
        epilog=("The real run sends the requests the simulation's replication 0 draws (same arrival and phase "
                "times), to 127.0.0.1 only. Components: dynosim testbed --check. 'dynosim testbed replay FILE' "
                "replays a router log under several app-server configurations (see dynosim testbed replay "
                "--help). Details: docs/testbed.md."))
    # The subparsers build their parsers with one class: this one is the testbed's own.
    p.__class__ = TestbedParser
    replay = testbed_replay.build_parser(f"{p.prog} replay")
    replay.set_defaults(handler=testbed_replay.main)
    p.replay = replay
    add_scenario_arguments(p)
    p.add_argument("--policy", type=policy_list, metavar="P1,P2",
                   help=f"routing policies to run instead of router.policy ({', '.join(policy_names())})")
    p.add_argument("--json", action="store_true", help='print {"results": [{"policy", "simulated", "measured", ...}]}')
    p.add_argument("--out", metavar="DIR", type=Path,
                   help="write testbed.json, requests-POLICY.csv (per request) and cdf.png into DIR")
    p.add_argument("--runs", type=positive_int, default=1, metavar="N",
                   help="real runs per policy (run k sends the simulation's replication k; default 1), "
                        "for the measured side's spread")
    p.add_argument("--calibrate", action="store_true",
                   help="first measure the stack's own costs per request (router.connect, the server's CPU "
                        "app.request_cpu, the worker's app.overhead, fleet.cpu_jitter, and router.colocated_cpu: "
                        "HAProxy's and the load generator's CPU on the dynos' cores) in two short real runs of "
                        "the scenario's dynos, print them and the --set lines, and simulate with them")
    p.add_argument("--check", action="store_true",
                   help="say which of haproxy, postgres, gunicorn, gevent, psycopg and the Ruby servers (ruby, puma, "
                        "unicorn, ruby-pg, ruby-rack, ruby-rack-timeout) are installed, and how to install them")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    from ..testbed.tools import tools

    if args.check:
        return check(tools())
    from ..testbed.run import testbed

    scenario = scenario_from_args(args)
    if "autoscale" in scenario.doc:
        return fleet_main(args, scenario)
    with activity() as shown:
        task = shown.task("testbed")
        doc = testbed(scenario, policies=args.policy, runs=args.runs, calibrate=args.calibrate,
                      progress=lambda m: shown.update(task, note=m))
    records = {r["policy"]: r.pop("_records") for r in doc["results"]}
    if args.out is not None:
        write_outputs(args.out, doc, records)
    if args.json:
        print_json(doc)
    else:
        print_comparison(doc)
    return 0


def check(found: List[Any]) -> int:
    console = stdout_console()
    for t in found:
        if t.present:
            console.print(f"[green]found[/]    {t.name} {t.version or ''} ({t.path})", highlight=False)
        else:
            console.print(f"[red]missing[/]  {t.name}: install with {t.install}", highlight=False)
    return 0 if all(t.present for t in found) else 1


def calibration_lines(calibration: Dict[str, Any]) -> List[str]:
    """What the calibration measured, in lines to print, the --set line last."""
    runs = calibration["runs"]
    idle, busy = runs.get("idle") or {}, runs.get("busy") or {}
    measured = calibration["measured"]

    def ms(value: Optional[float], digits: int = 3) -> str:
        return "not measured" if value is None else f"{value * 1e3:.{digits}f} ms"

    g = idle.get("gunicorn") or {}
    # gunicorn's worker class, or the Ruby server (its worker_class is the server's name).
    kind = g.get("worker_class") if g.get("server", "gunicorn") != "gunicorn" else f"gunicorn {g.get('worker_class')}"
    lines = [f"calibration: {kind}, {g.get('workers')} worker(s)"
             + (f" of {g.get('threads')} threads" if (g.get("threads") or 1) > 1 else "")
             + f" per dyno; requests of 2 ms CPU + 8 ms sleep, "
             f"{'nginx least_conn' if idle.get('router') == 'nginx' else 'HAProxy leastconn'}; "
             f"{idle.get('requests', 0)} with "
             f"{idle.get('clients', 0)} client(s) (one per dyno), {busy.get('requests', 0)} with "
             f"{busy.get('clients', 0)} (two per worker slot)"]
    server = idle.get("server_cpu") or {}
    busy_server = busy.get("server_cpu") or {}
    busy_over = busy.get("overhead") or {}
    lines.append(f"  router.connect   {ms(measured.get('router.connect'))}: sent -> the app starts, dyno idle")
    cv = server.get("cv")
    lines.append(f"  app.request_cpu  {ms(measured.get('app.request_cpu'))}: the worker process's CPU per request "
                 f"beyond the app's phases, busy run ({busy_server.get('requests', 0)} requests; idle run "
                 f"{ms(server.get('mean'))}" + (f", cv {cv:.2f})" if cv is not None else ")"))
    less = (f" less its server CPU ({ms(busy_over.get('server_cpu'))})" if "app.request_cpu" in calibration["set"]
            else "")
    lines.append(f"  app.overhead     {ms(measured.get('app.overhead'))}: the worker's time between two requests "
                 f"({ms(busy_over.get('between_requests'))}){less}, busy run")
    cpu = (idle.get("phases") or {}).get("cpu") or {}
    io = (idle.get("phases") or {}).get("io") or {}
    jitter = measured.get("fleet.cpu_jitter")
    lines.append(f"  fleet.cpu_jitter {'not measured' if jitter is None else f'{jitter:.4f}'}: the coefficient of "
                 f"variation of a 2 ms CPU phase's wall time ({cpu.get('phases', 0)} phases"
                 + (f", mean {cpu['ratio_mean']:.3f}x, p99 {cpu['ratio_p99']:.3f}x; from the interquartile range "
                    f"{cpu['cv_iqr']:.4f})" if cpu.get("cv_iqr") is not None else ")"))
    if "router.colocated_cpu" in measured:
        shared = busy.get("colocated") or {}
        by = ", ".join(f"{name} {ms(s)}" for name, s in (shared.get("stack") or {}).items())
        where = {"all": "all of it: the dynos' cores are every core they may use",
                 "none": "none of it: they may not use the dynos' cores",
                 "sampled": f"{(shared.get('share') or 0) * 100:.0f}% of it, by /proc/stat"}.get(shared.get("how") or "",
                                                                                              "unknown")
        lines.append(f"  router.colocated_cpu {ms(measured.get('router.colocated_cpu'))}: the stack's own programs' "
                     f"CPU per request on the dynos' cores, busy run ({by or 'not measured'}; on the dynos' cores: "
                     f"{where})")
    if io.get("overshoot_mean") is not None:
        lines.append(f"  for comparison: an 8 ms sleep overshoots by {ms(io['overshoot_mean'])}"
                     + (f" (sd {ms(io['overshoot_sd'])}, cv {io['cv']:.4f})" if io.get("cv") is not None else ""))
    lines += [f"  warning: {w}" for w in calibration.get("warnings") or []]
    lines.append("simulated with: " + (" ".join(calibration["set_lines"]) or "nothing (nothing measured)"))
    return lines


#: Each service's figures in the table (``services.NAME.`` before each).
SERVICE_METRICS = ["requests", "response.mean", "response.p50", "response.p99", "queue.mean", "service_mean",
                   "utilisation.mean", "errors.total", "calls.sent", "calls.timed_out", "calls.failed"]


def service_metrics(report: Dict[str, Any]) -> List[str]:
    """The table's rows of a report's services (docs/testbed.md, "Services that call services")."""
    names = list((report.get("summary") or {}).get("services") or {})
    return [f"services.{name}.{m}" for name in names for m in SERVICE_METRICS]


def print_measured(console: Any, result: Dict[str, Any]) -> None:
    """A real run with nothing simulated beside it (services whose calls the engine does not
    simulate yet): the measured figures, the entry's and each service's."""
    real = result["measured"]
    console.print(f"[bold]{result['policy']}[/]: {real['scenario']}, {real['dynos']} dynos; measured "
                  f"{real['replications']} time(s); not simulated", highlight=False)
    rows = []
    for metric in TABLE_METRICS + service_metrics(real):
        try:
            m = lookup(real["summary"], metric)
        except KeyError:
            continue
        rows.append({"metric": metric, "measured": m, "_time": is_time_metric(metric)})
    columns = [Column("metric", lambda r: r["metric"], kind="text"),
               Column("measured", lambda r: _fmt(r["measured"]["mean"], r) + _ci(r["measured"], r), kind="text")]
    table, _hidden = results_table(console, columns, rows)
    console.print(table)
    for warning in result["testbed"].get("warnings") or []:
        console.print(f"warning: {warning}", highlight=False, markup=False)


def print_comparison(doc: Dict[str, Any]) -> None:
    console = stdout_console()
    if doc.get("calibration"):
        for line in calibration_lines(doc["calibration"]):
            console.print(line, highlight=False, markup=False)
    for result in doc["results"]:
        sim, real = result["simulated"], result["measured"]
        if sim is None:
            print_measured(console, result)
            continue
        runs = int(real["replications"])
        twins = "replication 0" if runs == 1 else f"replications 0-{runs - 1}"
        console.print(f"[bold]{result['policy']}[/]: {sim['scenario']}, {sim['dynos']} dynos; simulated "
                      f"{sim['replications']} replications (mean and 95% interval; 'paired sim.' is {twins}, which "
                      f"drew the requests that were sent); measured {runs} time{'s' if runs > 1 else ''}",
                      highlight=False)
        rows = []
        for metric in TABLE_METRICS + service_metrics(real):
            try:
                s = lookup(sim["summary"], metric)
                m = lookup(real["summary"], metric)
                runs = int(real["replications"])
                paired = sum(float(lookup(rep, metric)) for rep in sim["per_replication"][:runs]) / runs
            except KeyError:
                continue
            if metric.startswith("errors.") and float(s["mean"]) == 0 and float(m["mean"]) == 0:
                continue  # an error neither run had: no row
            rows.append({"metric": metric, "simulated": s, "paired": paired, "measured": m,
                         "difference": result["difference"].get(metric),
                         "paired_difference": result["paired_difference"].get(metric), "_time": is_time_metric(metric)})
        columns = [
            Column("metric", lambda r: r["metric"], kind="text"),
            Column("simulated (95% CI)", lambda r: _fmt(r["simulated"]["mean"], r) + _ci(r["simulated"], r), kind="text"),
            Column("paired sim.", lambda r: _fmt(r["paired"], r), kind="text", drop=2),
            Column("measured", lambda r: _fmt(r["measured"]["mean"], r) + _ci(r["measured"], r), kind="text"),
            Column("vs mean", lambda r: _pct(r["difference"]), kind="text"),
            Column("vs rep. 0", lambda r: _pct(r["paired_difference"]), kind="text", drop=1),
        ]
        table, hidden = results_table(console, columns, rows)
        console.print(table)
        if hidden:
            console.print(f"left out to fit the terminal: {', '.join(hidden)} (--json has every figure)",
                          highlight=False)
        extras = result["testbed"]
        late = extras["lateness"]
        console.print(f"load generator lateness: p50 {late['p50'] * 1e3:.3f} ms, p99 {late['p99'] * 1e3:.3f} ms, "
                      f"max {late['max'] * 1e3:.3f} ms; {_router_line(extras)}", highlight=False)
        over = extras.get("overhead") or {}
        parts = [f"{name.replace('_', ' ')} {value * 1e3:.2f} ms" for name, value in over.items() if value is not None]
        if parts:
            console.print("the real stack adds per request (means): " + ", ".join(parts), highlight=False)
        costs = {k: v for k, v in (extras.get("stack_costs") or {}).items() if v is not None and v > 0}
        if costs:
            modelled = extras.get("modelled_costs") or {}
            now = ", ".join(f"{k} {float(modelled.get(k) or 0.0) * 1e3:.2f} ms" for k in costs)
            console.print("to model them: " + " ".join(f"--set {k}={v * 1e3:.2f}ms" for k, v in costs.items())
                          + f" (the simulation had {now})", highlight=False)
        for w in extras["warnings"]:
            console.print(f"[yellow]warning[/]: {w}", highlight=False)


def _router_line(extras: Dict[str, Any]) -> str:
    """The real router as run: "HAProxy: balance ..." or "nginx: least_conn; ..."."""
    router = extras.get("router") or {"kind": "haproxy", "config": extras.get("haproxy", "")}
    return f"{'nginx' if router['kind'] == 'nginx' else 'HAProxy'}: {router['config']}"


def _pct(value: Optional[float]) -> str:
    return "" if value is None else f"{value * 100:+.1f}%"


def _fmt(value: Any, row: Dict[str, Any]) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if row.get("_time"):
        return f"{value * 1e3:.1f} ms"
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value)}"
    return f"{value:.3f}"


def _ci(estimate: Dict[str, Any], row: Dict[str, Any]) -> str:
    lo, hi = estimate.get("ci_low"), estimate.get("ci_high")
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return ""
    return f" ({_fmt(lo, row)}–{_fmt(hi, row)})"


def write_outputs(folder: Path, doc: Dict[str, Any], records: Dict[str, List[Dict[str, Any]]]) -> None:
    from ..testbed import plots
    from ..testbed.run import write_json, write_records

    writers: Dict[Path, Any] = {folder / "testbed.json": lambda p: write_json(p, doc)}
    for policy, rows in records.items():
        writers[folder / f"requests-{policy}.csv"] = lambda p, rows=rows: write_records(p, rows)
    writers[folder / "cdf.png"] = lambda p: plots.cdf_plot(p, doc, records)
    write_files(writers, option="--out")
    print(f"wrote {', '.join(str(p) for p in writers)}", file=sys.stderr)


def fleet_main(args: argparse.Namespace, scenario: Any) -> int:
    """A scenario with [autoscale]: the real autoscaled fleet beside the simulated one."""
    from ..errors import DynosimError
    from ..testbed.run import fleet_testbed

    if args.runs != 1:
        raise DynosimError("--runs: an autoscaled fleet runs once per policy")
    with activity() as shown:
        task = shown.task("testbed")
        doc = fleet_testbed(scenario, policies=args.policy, calibrate=args.calibrate,
                            progress=lambda m: shown.update(task, note=m))
    if args.out is not None:
        write_fleet_outputs(args.out, doc)
    if args.json:
        print_json(doc)
    else:
        print_fleet(doc)
    return 0


def print_fleet(doc: Dict[str, Any]) -> None:
    console = stdout_console()
    if doc.get("calibration"):
        for line in calibration_lines(doc["calibration"]):
            console.print(line, highlight=False, markup=False)
    for result in doc["results"]:
        real = result["measured"]
        console.print(f"[bold]{result['policy']}[/]: autoscale rule {real['rule']} every {real['interval']:g} s "
                      f"(min {real['bounds'][0]}, max {real['bounds'][1]}); {real['sent']} requests sent, "
                      f"{real['errors']} errors, {real['killed']} dyno(s) killed at the end of their grace",
                      highlight=False)
        comparison = result["comparison"]
        console.print("fleet size changes, measured (simulated): " + "; ".join(
            f"{_size(c['measured_size'])} at {_at(c['measured'])} ({_size(c['simulated_size'])} at "
            f"{_at(c['simulated'])}){'' if c['within_interval'] else ' [red]apart[/]'}"
            for c in comparison["changes"]), highlight=False)
        if comparison["per_minute"]:
            console.print("p95 per minute, measured / simulated replication 0 (mean of the replications): " + "; ".join(
                f"{m['minute']}: {_ms(m['measured'])} / {_ms(m['paired'])} ({_pct(m['paired_difference'])}; "
                f"{_ms(m['simulated'])})" for m in comparison["per_minute"]), highlight=False)
        tries = comparison.get("attempts_per_request")
        if tries:
            console.print(f"tries per request, measured / simulated replication 0 (mean of the replications ± sd): "
                          f"{tries['measured']:.3f} / {tries['paired']:.3f} ({tries['simulated']:.3f} ± "
                          f"{tries['sd']:.3f}){'' if tries['within'] else ' [red]apart[/]'}", highlight=False)
        verdict = comparison.get("stability")
        if verdict:
            console.print(f"stability: measured {'recovered' if verdict['measured'] else 'stayed down'}; "
                          f"simulated {verdict['simulated']:.0%} of the replications recovered", highlight=False)
        p95 = comparison["p95_agrees"]
        console.print(f"size changes within one interval: {'yes' if comparison['fleet_agrees'] else 'no'}; "
                      f"p95 within 25% every minute: {'-' if p95 is None else 'yes' if p95 else 'no'}",
                      highlight=False)
        for w in real["warnings"]:
            console.print(f"[yellow]warning[/]: {w}", highlight=False)


def _size(n: Optional[int]) -> str:
    return "-" if n is None else str(n)


def _at(t: Optional[float]) -> str:
    return "-" if t is None else f"{t:.1f} s"


def _ms(t: Optional[float]) -> str:
    return "-" if t is None else f"{t * 1e3:.0f} ms"


def write_fleet_outputs(folder: Path, doc: Dict[str, Any]) -> None:
    """testbed.json, and fleet-POLICY.csv: per second, the measured fleet and the simulated
    one (replication 0)."""
    import csv

    from ..testbed.run import write_json

    def series(path: Path, result: Dict[str, Any]) -> None:
        sim = {row["time"]: row for row in result["simulated"]["series"]}
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time", "dynos_booting", "dynos_up", "dynos_draining", "sim_dynos_booting", "sim_dynos_up",
                        "sim_dynos_draining"])
            for row in result["measured"]["series"]:
                other = sim.get(row["time"], {})
                w.writerow([row["time"], row["dynos_booting"], row["dynos_up"], row["dynos_draining"],
                            other.get("dynos_booting", ""), other.get("dynos_up", ""), other.get("dynos_draining", "")])

    writers: Dict[Path, Any] = {folder / "testbed.json": lambda p: write_json(p, doc)}
    for result in doc["results"]:
        writers[folder / f"fleet-{result['policy']}.csv"] = lambda p, r=result: series(p, r)
    write_files(writers, option="--out")
    print(f"wrote {', '.join(str(p) for p in writers)}", file=sys.stderr)
