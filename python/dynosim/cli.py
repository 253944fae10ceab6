"""The ``dynosim`` command.

Exit codes: 0 success; 2 invalid input (arguments, scenario) or an output that cannot be
written; 3 unstable or overloaded system; 130 interrupted (Ctrl-C); 141 stdout closed early
(``dynosim run --json | head -1``); 143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import signal
import sys
import threading
import warnings
from typing import Any, Callable, Iterator, List, NoReturn, Optional, Sequence, Tuple

from . import _dynosim
from .api import run as run_scenario
from .display import Column, number
from .errors import DynosimError, NotSteadyWarning, OverloadedError, ScenarioError, UnstableError
from .output import print_json, silence_stdout, stdout_document
from .results import PolicyResult, Results
from .scenario import Scenario, builtin_scenarios

EXIT_INPUT = 2
EXIT_UNSTABLE = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by it
EXIT_TERMINATED = 143  # 128 + SIGTERM


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors reported on one line like every other error."""

    def error(self, message: str) -> NoReturn:
        raise DynosimError(f"{message} (see: {self.prog} --help)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 0 <= value < 2**64:
        raise argparse.ArgumentTypeError(f"must be from 0 to 2^64-1, got {value}")
    return value


def _policy_list(text: str) -> List[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected one or more policy names separated by commas")
    known = _dynosim.registry()["policies"]
    for name in names:
        if name not in known:
            raise argparse.ArgumentTypeError(f"unknown policy {name!r}; expected one of: {', '.join(known)}")
    return names


def build_parser() -> argparse.ArgumentParser:
    policies = ", ".join(_dynosim.registry()["policies"])
    parser = _Parser(
        prog="dynosim",
        description="Simulate request routing across dynos: queue times, capacity, cost.",
        epilog="Run 'dynosim COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"dynosim {_dynosim.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def scenario_command(name: str, help: str) -> argparse.ArgumentParser:
        p = commands.add_parser(name, help=help, description=help)
        add_scenario_arguments(p)
        p.add_argument("--json", action="store_true", help="print JSON (fields: docs/output.md)")
        add_wide_argument(p)
        return p

    run = scenario_command("run", "Run a scenario and print its queueing figures.")
    run.add_argument("--policy", type=_policy_list, metavar="P1,P2",
                     help=f"routing policies to run side by side instead of router.policy ({policies})")
    compare = scenario_command("compare", "Run several routing policies side by side on the same traffic.")
    compare.add_argument("--policy", type=_policy_list, required=True, metavar="P1,P2",
                         help=f"routing policies to compare ({policies})")
    commands.add_parser("scenarios", help="List the built-in scenarios.",
                        description="List the built-in scenarios.")
    for module in _command_modules():
        module.register(commands)
    return parser


def _command_modules() -> list:
    """Commands that live in their own module: each has ``register(subparsers)``, which adds
    its parser and sets ``handler`` (a function of the parsed arguments returning the exit
    code)."""
    from . import animate, capacity, demo, init, keys, sweep

    return [init, demo, capacity, sweep, animate, keys]


def add_wide_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wide", action="store_true",
                   help="show every column of the table, however wide (the default fits the terminal)")


def add_scenario_arguments(p: argparse.ArgumentParser) -> None:
    """The scenario argument and the options every scenario command shares."""
    p.add_argument("scenario", nargs="?", default="rapgenius",
                   help="a TOML file or a built-in scenario name (default: rapgenius)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a scenario key, e.g. --set fleet.dynos=100 (repeatable)")
    p.add_argument("--seed", type=_seed, help="random seed (run.seed)")
    p.add_argument("--replications", type=_positive_int, help="independent replications (run.replications)")
    p.add_argument("--duration", metavar="TIME", help="measured simulated time, e.g. 5min (run.duration)")


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """The scenario named on the command line with its overrides applied."""
    shorthand = {}
    if args.seed is not None:
        shorthand["run.seed"] = args.seed
    if args.replications is not None:
        shorthand["run.replications"] = args.replications
    if args.duration is not None:
        shorthand["run.duration"] = args.duration
    return Scenario.load(args.scenario).with_overrides(args.overrides).with_overrides(shorthand)


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: the command stops as it does on Ctrl-C (runs stop, temporary files
    are removed), and exits with 143."""


@contextlib.contextmanager
def _sigterm_stops() -> Iterator[List[bool]]:
    """While the block runs, SIGTERM raises Terminated in the main thread; the list it gives
    becomes [True] once SIGTERM has arrived. A run inside the engine reports an interruption
    of its own (the exception the handler raised does not get through it), hence the flag."""
    received: List[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield received  # only the main thread can install a handler
        return

    def handler(signum: int, frame: Any) -> None:
        received.append(True)
        # A second SIGTERM must not cut the clean-up of the first short.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Optional[Sequence[str]] = None) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("always", NotSteadyWarning)
        warnings.showwarning = _warn
        return _main(argv)


def _warn(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
    """A warning is one line on stderr, like an error."""
    print(f"dynosim: warning: {message}", file=sys.stderr)


def _main(argv: Optional[Sequence[str]]) -> int:
    with _sigterm_stops() as terminated:
        try:
            args = build_parser().parse_args(argv)
            with stdout_document():
                return _dispatch(args)
        except (UnstableError, OverloadedError) as e:
            _fail(e)
            return EXIT_UNSTABLE
        except DynosimError as e:
            _fail(e)
            return EXIT_INPUT
        except KeyboardInterrupt:
            print(f"dynosim: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
            return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
        except BrokenPipeError:
            silence_stdout()
            return EXIT_BROKEN_PIPE


def _dispatch(args: argparse.Namespace) -> int:
    if args.command in ("run", "compare"):
        return _run(args)
    if args.command == "scenarios":
        for name, description in builtin_scenarios().items():
            print(f"{name:20} {description}")
        return 0
    if getattr(args, "handler", None):
        return int(args.handler(args))
    build_parser().print_help()  # no command: what there is to do
    return 0


def _fail(error: Exception) -> None:
    print(f"dynosim: error: {error}", file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    scenario = scenario_from_args(args)
    cases = scenario.cases or [("", scenario)]
    for _, case in cases:  # validate every case before running any
        (case.with_overrides({"router.policy": args.policy}) if args.policy else case).validate()
    from .display import status

    policies = ", ".join(args.policy or scenario.policies)
    with status(f"running {policies}" + (f", {len(cases)} cases" if scenario.cases else "")):
        results = [(label, run_scenario(case, policies=args.policy)) for label, case in cases]
    if args.json:
        doc = (results[0][1].to_dict() if not scenario.cases else
               {"cases": [dict(label=label, **r.to_dict()) for label, r in results]})
        print_json(doc)
    else:
        print_table(results, wide=args.wide)
    return 0


def print_table(cases: List[Tuple[str, Results]], *, wide: bool = False) -> None:
    """One row per (case, policy); the case column only when the scenario has cases. The
    default columns fit 80 terminal columns; ``wide`` adds the rest."""
    from .display import duration, results_table, stdout_console

    console = stdout_console(wide=wide)
    labelled = any(label for label, _ in cases)
    head = cases[0][1][0].report
    closed = head["summary"].get("closed_loop")
    if closed:
        # A closed loop's rate is what the app sustains (the req/s column), and with
        # arrivals.requests its run lasts until they are answered, not run.duration.
        traffic, window = f"a closed loop of {closed['clients']['mean']:,.0f} clients", ""
    else:
        traffic = f"{head['arrival_rate'] * 60:,.0f} req/min"
        window = f" × {head['duration'] / 60:g} min (after {head['warmup']:g} s warm-up)"
    console.print(
        f"[bold]{head['scenario']}[/bold]: {traffic}, mean service {duration(head['service_mean'])}, "
        f"{head['replications']} replications{window}, seed {head['seed']}",
        highlight=False,
    )
    rows = [(label, r) for label, results in cases for r in results]
    columns = list(RUN_COLUMNS)
    if any("closed_loop" in r.summary for _, r in rows):
        columns.insert(2, Column("req/s", _metric_or_nan("closed_loop.requests_per_s"), ci=True))
    if any("dyno" in r.summary for _, r in rows):
        columns.insert(-3, Column("cpu", _metric_or_nan("dyno.cpu_utilisation"), kind="percent", wide=True))
    if any(r.report["routers"] > 1 for _, r in rows):
        columns.insert(2, Column("routers", lambda row: row[1].report["routers"], drop=2))
    if labelled:
        # A case's label usually says what its policy is: the policy column gives way early.
        columns[0] = dataclasses.replace(columns[0], drop=2)
        columns.insert(0, Column("case", lambda row: row[0], kind="text", wrap=True, max_width=24))
    table, left_out = results_table(console, columns, rows, wide=wide)
    console.print(table)
    notes = ["± is the half-width of a 95% confidence interval over replications",
             "max queue: most requests waiting at once, at the router or at one dyno"]
    if not wide:
        notes.append(f"not shown: {', '.join(left_out)}; --wide shows them" if left_out else
                     "--wide shows more columns")
    console.print("; ".join(notes) + ".", style="dim", highlight=False)


def _dynos_cell(row: Tuple[str, PolicyResult]) -> str:
    """``75``, or ``25×2`` for 25 dynos of 2 slots."""
    rep = row[1].report
    return f"{rep['dynos']:,}" + (f"×{rep['slots']}" if rep["slots"] > 1 else "")


def _max_queue_cell(row: Tuple[str, PolicyResult]) -> str:
    """Where requests queue: intelligent routing queues at the router, the others at dynos."""
    r = row[1]
    dyno, router = r["max_queue_depth.dyno"], r["max_queue_depth.router"]
    if dyno == router == 0:
        return "0"
    return f"{number(router)} router" if router > dyno else f"{number(dyno)} dyno"


def _metric(metric: str) -> Callable[[Tuple[str, PolicyResult]], Any]:
    return lambda row: row[1].estimate(metric)


def _report(key: str) -> Callable[[Tuple[str, PolicyResult]], Any]:
    return lambda row: row[1].report[key]


def _metric_or_nan(metric: str) -> Callable[[Tuple[str, PolicyResult]], Any]:
    """A metric that only some scenarios report (a closed loop's, a dyno's insides)."""
    def value(row: Tuple[str, PolicyResult]) -> Any:
        try:
            return row[1].estimate(metric)
        except KeyError:
            return math.nan
    return value


def _load_cell(row: Tuple[str, PolicyResult]) -> float:
    """The offered load; none for a closed loop, whose clients wait for their responses (its
    arrival rate is only the most they could send)."""
    rep = row[1].report
    return math.nan if "closed_loop" in rep["summary"] else float(rep["offered_load"])


#: The run and compare table: what to show of each result, narrow (the default) or wide.
RUN_COLUMNS = [
    Column("policy", lambda row: row[1].policy, kind="text"),
    Column("dynos", _dynos_cell, kind="text", drop=4),
    Column("load", _load_cell, kind="percent", drop=1),
    Column("queued", _metric("queued_fraction"), kind="percent", ci=True),
    Column("queue\nmean", _metric("queue.mean"), kind="time", ci=True),
    Column("queue mean\nof queued", _metric("queue_of_queued.mean"), kind="time", ci=True, wide=True),
    Column("queue median\nof queued", _metric("queue_of_queued.p50"), kind="time", wide=True),
    Column("queue\np99", _metric("queue.p99"), kind="time", drop=5),
    Column("response\nmean", _metric("response.mean"), kind="time", wide=True),
    Column("response\np99", _metric("response.p99"), kind="time", drop=3),
    Column("utilisation", _metric("utilisation.mean"), kind="percent", wide=True),
    Column("max\nqueue", _max_queue_cell, kind="text", narrow=True, drop=6),
    Column("max dyno\nqueue", _metric("max_queue_depth.dyno"), wide=True),
    Column("max router\nqueue", _metric("max_queue_depth.router"), wide=True),
]


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
