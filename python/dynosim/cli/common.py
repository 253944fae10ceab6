"""What the ``dynosim`` commands share: exit codes, one-line errors and warnings, SIGTERM
handling, and the options and argument types of more than one command.

The verb modules import this module, never :mod:`dynosim.cli.entry` (which imports them)."""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, List, NoReturn, Optional, TypeVar

from .. import _dynosim, html_report
from ..capacity import Target, parse_target
from ..display import status
from ..errors import DynosimError, LogError, ScenarioError
from ..logs.reading import FORMATS
from ..scenario import Scenario

EXIT_INPUT = 2
EXIT_UNSTABLE = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by it
EXIT_TERMINATED = 143  # 128 + SIGTERM


class Parser(argparse.ArgumentParser):
    """argparse, with its usage errors reported on one line like every other error."""

    def error(self, message: str) -> NoReturn:
        raise DynosimError(f"{message} (see: {self.prog} --help)")


def fail(error: Exception) -> None:
    """An error is one line on stderr."""
    print(f"dynosim: error: {error}", file=sys.stderr)


def warn(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
    """A warning is one line on stderr, like an error (a ``warnings.showwarning``); it is also
    kept for the command's HTML report (:func:`recorded_warnings`)."""
    _WARNINGS.append(str(message))
    print(f"dynosim: warning: {message}", file=sys.stderr)


#: The warnings this command has printed, in order (see :func:`warn`).
_WARNINGS: List[str] = []


def recorded_warnings() -> List[str]:
    """The warnings this command printed so far, each once, for its HTML report."""
    return list(dict.fromkeys(_WARNINGS))


def forget_warnings() -> None:
    """A new command starts with none (``main`` may run several in one process: the tests)."""
    _WARNINGS.clear()


def warning(text: str) -> None:
    """A warning of the command's own (not the warnings module's): printed and recorded as
    :func:`warn` does."""
    warn(text, UserWarning, "", 0)


def add_html_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--html", type=Path, metavar="FILE",
                   help="also write a self-contained HTML report (works offline): the scenario, the table, "
                        "interactive plots, notes and warnings")


def write_html(path: Path, doc: Any) -> None:
    """Writes a command's HTML report (:mod:`dynosim.html_report`) and says so on stderr."""
    with status("writing the HTML report"):
        html_report.write(path, doc)
    print(f"wrote {path}", file=sys.stderr)


def command_line() -> str:
    """The command as typed (for a report's header): ``dynosim`` and its arguments."""
    return " ".join(["dynosim", *(shlex.quote(a) for a in sys.argv[1:])])


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: the command stops as it does on Ctrl-C (runs stop, temporary files
    are removed), and exits with 143."""


@contextlib.contextmanager
def sigterm_stops() -> Iterator[List[bool]]:
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


# --- argument types: every command's checks of its arguments are here ----------------------


T = TypeVar("T", int, float)


def _parsed(text: str, convert: Callable[[str], T], expected: str) -> T:
    """``convert(text)``, or the argument error "expected EXPECTED, got TEXT"."""
    try:
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None


def positive_int(text: str) -> int:
    value = _parsed(text, int, "a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def natural_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def byte_size(text: str) -> float:
    """A size as a scenario writes one (``run.max_memory``): ``4GB``, ``512MB``, ``1.5GiB``, bytes."""
    try:
        value = _dynosim.parse_bytes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{e}") from None
    if value is None or not value > 0:
        raise argparse.ArgumentTypeError(f"expected a size such as 4GB or 512MB, got {text!r}")
    return float(value)


def seed(text: str) -> int:
    value = _parsed(text, int, "a whole number")
    if not 0 <= value < 2**64:
        raise argparse.ArgumentTypeError(f"must be from 0 to 2^64-1, got {value}")
    return value


def port(text: str) -> int:
    """A TCP port, 0 for any free one (``serve --port``)."""
    value = _parsed(text, int, "a port number")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {value}")
    return value


def share(text: str) -> float:
    """A share from 0 to 1 (``testbed replay --keep``)."""
    value = _parsed(text, float, "a share from 0 to 1")
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a share from 0 to 1, got {text!r}")
    return value


def positive_number(text: str) -> float:
    """A finite number above 0 (``--speed``, ``animate --seconds``, ``--fps``)."""
    value = _parsed(text, float, "a number")
    if not (value > 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def positive_duration(text: str) -> float:
    """A duration above 0 with its unit, in seconds (``testbed replay --sample-every``)."""
    seconds = _dynosim.parse_duration(text)
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a duration such as 250ms, got {text!r}")
    return float(seconds)


_SIZE = re.compile(r"^\s*(\d+)\s*([KkMmGg]i?[Bb]?|[Bb])?\s*$")
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}


def size(text: str) -> int:
    """Bytes, or with a unit: ``256KiB``, ``1MiB`` (K, KB and KiB are all 1024; ``testbed
    replay --alloc``)."""
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected a size such as 256KiB or 1MiB, got {text!r}")
    unit = (match.group(2) or "").lower()[:1]
    return int(match.group(1)) * _UNITS[unit]


def target(text: str) -> Target:
    """``--target "METRIC OP VALUE"`` (capacity, tune)."""
    try:
        return parse_target(text)
    except ScenarioError as e:
        raise argparse.ArgumentTypeError(e.message) from None


def policy_list(text: str) -> List[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected one or more policy names separated by commas")
    known = policy_names()
    for name in names:
        if name not in known:
            raise argparse.ArgumentTypeError(f"unknown policy {name!r}; expected one of: {', '.join(known)}")
    return names


def policy_names() -> List[str]:
    """The engine's routing policies, in its order."""
    return list(_dynosim.registry()["policies"])


# --- options ---------------------------------------------------------------------------------


def add_wide_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wide", action="store_true",
                   help="show every column of the table, however wide (the default fits the terminal)")


def add_dask_argument(p: argparse.ArgumentParser) -> None:
    """``--dask``: the runs as tasks on a Dask cluster (sweep, capacity, tune, ramp)."""
    p.add_argument("--dask", metavar="ADDRESS",
                   help="run as tasks on a Dask cluster: a scheduler's address (tcp://HOST:8786), or local for a "
                        "cluster of one worker process per core on this machine; the same results as without "
                        'it (needs pip install "dynosim[dask]"; docs/distributed.md)')


def add_scenario_arguments(p: argparse.ArgumentParser) -> None:
    """The scenario argument and the options every scenario command shares."""
    p.add_argument("scenario", nargs="?", default="rapgenius",
                   help="a TOML file or a built-in scenario name (default: rapgenius)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a scenario key, e.g. --set fleet.dynos=100 (repeatable)")
    p.add_argument("--seed", type=seed, help="random seed (run.seed)")
    p.add_argument("--replications", type=positive_int, help="independent replications (run.replications)")
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


def add_log_arguments(p: argparse.ArgumentParser, window: bool = True, spans: bool = False) -> None:
    """The options every command that reads router logs takes (the logs commands, testbed replay);
    with ``spans``, the files may be traces instead (``logs fit``)."""
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="router logs" + (" or traces (spans as JSON lines)" if spans else "") + " (- for standard input)")
    p.add_argument("--format", choices=FORMATS + (("spans",) if spans else ()), default="auto",
                   help="read every line as this router's" + (", or as spans" if spans else "")
                        + " (default: auto, line by line" + ("; spans when the first file's first line is one"
                                                             if spans else "") + ")")
    p.add_argument("--log-format", metavar="FORMAT",
                   help="nginx's log_format (the string or the directive; @FILE reads it from FILE); default: "
                        "combined followed by $request_time $upstream_response_time")
    p.add_argument("--host", help="only requests to this host (the Host header), for logs of several apps")
    if window:
        p.add_argument("--window", metavar="START..END",
                       help="only requests arriving in [START, END): each a time (2014-01-09T06:00, UTC unless "
                            "it has an offset) or a duration from the log's first arrival (10min); either may be "
                            "left out (1h.., ..30min)")


def log_format_arg(text: Optional[str]) -> Optional[str]:
    """``--log-format``: the text, or FILE's with ``@FILE``."""
    if text is None or not text.startswith("@"):
        return text
    path = Path(text[1:])
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise LogError(f"cannot read {path}: {e.strerror or e}", file="--log-format") from None
