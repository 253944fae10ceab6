"""The ``dynosim`` command.

Exit codes: 0 success; 2 invalid input (arguments, scenario) or an output that cannot be
written; 3 unstable or overloaded system; 130 interrupted (Ctrl-C); 141 stdout closed early
(``dynosim run --json | head -1``); 143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import sys
import threading
from typing import Any, Iterator, List, NoReturn, Optional, Sequence, Tuple

from . import _dynosim
from .api import run as run_scenario
from .errors import DynosimError, OverloadedError, ScenarioError, UnstableError
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
    from . import animate, capacity, demo, sweep

    return [demo, capacity, sweep, animate]


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
    build_parser().print_help()
    return EXIT_INPUT


def _fail(error: Exception) -> None:
    print(f"dynosim: error: {error}", file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    scenario = scenario_from_args(args)
    cases = scenario.cases or [("", scenario)]
    for _, case in cases:  # validate every case before running any
        (case.with_overrides({"router.policy": args.policy}) if args.policy else case).validate()
    results = [(label, run_scenario(case, policies=args.policy)) for label, case in cases]
    if args.json:
        doc = (results[0][1].to_dict() if not scenario.cases else
               {"cases": [dict(label=label, **r.to_dict()) for label, r in results]})
        print_json(doc)
    else:
        print_table(results)
    return 0


def _duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    if seconds == 0:
        return "0"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def _with_ci(r: PolicyResult, metric: str, fmt: Any) -> str:
    e = r.estimate(metric)
    if math.isnan(e.half_width):
        return fmt(e.mean)
    return f"{fmt(e.mean)} ±{fmt(e.half_width)}"


def _percent(x: float) -> str:
    return f"{100 * x:.1f}%" if abs(x) >= 0.01 else f"{100 * x:.2g}%"


def print_table(cases: List[Tuple[str, Results]]) -> None:
    """One row per (case, policy); the case column only when the scenario has cases."""
    from rich.console import Console
    from rich.table import Table

    # Piped output gets a width that fits the table rather than rich's 80 columns.
    console = Console(width=None if sys.stdout.isatty() else 160)
    labelled = any(label for label, _ in cases)
    head = cases[0][1][0].report
    console.print(
        f"[bold]{head['scenario']}[/bold]: {head['arrival_rate'] * 60:,.0f} req/min, mean service "
        f"{_duration(head['service_mean'])}, {head['replications']} replications × "
        f"{head['duration'] / 60:g} min (after {head['warmup']:g} s warm-up), seed {head['seed']}"
    )
    table = Table(show_lines=False, header_style="bold")
    if labelled:
        table.add_column("case", no_wrap=True)
    for col in ("policy", "dynos×slots", "load", "queued", "queue mean", "queue mean\n(queued)",
                "queue median\n(queued)", "queue p99", "response p99", "max dyno\nqueue"):
        table.add_column(col, justify="left" if col == "policy" else "right", no_wrap=True)
    for label, r in ((label, r) for label, results in cases for r in results):
        rep = r.report
        routers = f" ×{rep['routers']} routers" if rep["routers"] > 1 else ""
        table.add_row(
            *([label] if labelled else []),
            r.policy + routers,
            f"{rep['dynos']}×{rep['slots']}",
            f"{rep['offered_load']:.3f}",
            _with_ci(r, "queued_fraction", _percent),
            _with_ci(r, "queue.mean", _duration),
            _with_ci(r, "queue_of_queued.mean", _duration),
            _duration(r["queue_of_queued.p50"]),
            _duration(r["queue.p99"]),
            _duration(r["response.p99"]),
            f"{r['max_queue_depth.dyno']:.1f}",
        )
    console.print(table)
    console.print("± is the half-width of a 95% confidence interval over replications.", style="dim")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
