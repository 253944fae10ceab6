"""The ``dynosim`` command: builds the parser from the verb modules and runs the verb asked for.

Exit codes: 0 success; 2 invalid input (arguments, scenario) or an output that cannot be
written; 3 unstable or overloaded system; 130 interrupted (Ctrl-C); 141 stdout closed early
(``dynosim run --json | head -1``); 143 terminated (SIGTERM).

Each verb is a module of this package with ``register(subparsers)``, which adds its parser and
sets ``handler`` (a function of the parsed arguments returning the exit code). Verbs share
what they need through :mod:`dynosim.cli.common`; none imports this module.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Optional, Sequence

from .. import _dynosim
from ..errors import DynosimError, NotSteadyWarning, OverloadedError, UnstableError
from ..output import silence_stdout, stdout_document
from . import (animate, capacity, common, compare, demo, init, keys, logs, ramp, run, scenarios, serve, stability, sweep,
               testbed, tune)
from .common import (EXIT_BROKEN_PIPE, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_UNSTABLE, Parser, fail,
                     sigterm_stops)

#: The verbs, in the order of ``dynosim --help``.
VERBS = [run, compare, scenarios, init, demo, capacity, sweep, stability, tune, ramp, animate, serve, testbed, logs,
         keys]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="dynosim",
        description="Simulate request routing across dynos: queue times, capacity, cost.",
        epilog="Run 'dynosim COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"dynosim {_dynosim.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for verb in VERBS:
        verb.register(commands)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    common.forget_warnings()
    with warnings.catch_warnings():
        warnings.simplefilter("always", NotSteadyWarning)
        warnings.showwarning = common.warn
        return _main(argv)


def _main(argv: Optional[Sequence[str]]) -> int:
    with sigterm_stops() as terminated:
        try:
            args = build_parser().parse_args(argv)
            with stdout_document():
                return _dispatch(args)
        except (UnstableError, OverloadedError) as e:
            fail(e)
            return EXIT_UNSTABLE
        except DynosimError as e:
            fail(e)
            return EXIT_INPUT
        except KeyboardInterrupt:
            print(f"dynosim: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
            return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
        except BrokenPipeError:
            silence_stdout()
            return EXIT_BROKEN_PIPE


def _dispatch(args: argparse.Namespace) -> int:
    if getattr(args, "handler", None):
        return int(args.handler(args))
    build_parser().print_help()  # no command: what there is to do
    return 0
