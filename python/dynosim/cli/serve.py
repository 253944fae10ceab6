"""`dynosim serve`: the playground, a local web app over the Python API (:mod:`dynosim.serve`)."""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
from pathlib import Path
from typing import Any

from ..errors import DynosimError
from ..output import live_stdout
from .common import byte_size, natural_int, port, positive_int, warning

#: The loopback addresses the server listens on without a warning.
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def register(commands: argparse._SubParsersAction) -> None:
    help = "Start the playground: a local web page to edit a scenario and watch its results follow."
    p = commands.add_parser(
        "serve", help=help, description=help,
        epilog=("It listens on 127.0.0.1 (this machine only) unless --host says otherwise. A scenario from the page "
                "reads no file unless it is under --data DIR. At most --max-runs runs at once and --max-memory of "
                "engine state among them; beyond, a request waits its turn (the page shows its place) or is "
                "refused for a while. Ctrl-C stops it and its runs. Needs the 'ui' extra: "
                "pip install \"dynosim[ui]\". Example: dynosim serve rapgenius --port 8050 --max-memory 4GB"),
    )
    p.add_argument("scenario", nargs="?", metavar="SCENARIO",
                   help="a built-in scenario's name or a scenario file to open with (default: rapgenius)")
    p.add_argument("--port", type=port, default=8050, help="the port (default 8050; 0: any free port)")
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on (default 127.0.0.1; any other is reachable from other machines)")
    p.add_argument("--data", type=Path, metavar="DIR",
                   help="scenarios from the page may read files (samples, traces) under DIR, and only there")
    p.add_argument("--max-runs", type=positive_int, metavar="N",
                   help="engine runs at once, whatever the pages or clients (default: the number of cores)")
    p.add_argument("--max-memory", type=_memory, metavar="SIZE",
                   help="engine memory of the runs at once, estimated before each starts, e.g. 4GB or 512MB "
                        "(default: half the machine's memory)")
    p.add_argument("--max-queue", type=natural_int, metavar="N",
                   help="requests waiting for room beyond those (default: 4 x --max-runs); more are answered "
                        "503 with Retry-After")
    p.set_defaults(handler=main)


def _memory(text: str) -> float:
    value = byte_size(text)
    if value < 1e6:  # as run.max_memory: below it no run would fit
        raise argparse.ArgumentTypeError(f"must be at least 1MB, got {text!r}")
    return value


def main(args: argparse.Namespace) -> int:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise DynosimError("serve needs the 'ui' extra: pip install \"dynosim[ui]\" (Starlette and uvicorn)") from None
    from .. import serve as playground

    if args.data is not None and not args.data.is_dir():
        raise DynosimError(f"--data: {args.data} is not a folder")
    if not _is_loopback(args.host):
        warning(f"--host {args.host}: the playground is reachable from other machines, and runs what they send "
                "(within its budgets)")
    limits = {"max_runs": args.max_runs, "max_memory": args.max_memory, "max_queue": args.max_queue}
    app_check = playground.make_app(args.data.resolve() if args.data else None, args.scenario, **limits)
    del app_check  # the scenario and the folder are checked before anything listens

    def ready(server: Any) -> None:
        sockets = [s for srv in server.servers for s in srv.sockets]
        host, port = sockets[0].getsockname()[:2] if sockets else (args.host, args.port)
        shown = f"[{host}]" if ":" in str(host) else host
        print(f"dynosim playground: http://{shown}:{port}/ (Ctrl-C stops it)", file=live_stdout(), flush=True)

    playground.serve(args.host, args.port, args.data.resolve() if args.data else None, initial=args.scenario,
                     on_ready=ready, **limits)
    print("dynosim playground: stopped", file=sys.stderr)
    return 0


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(ipaddress.ip_address(a[4][0]).is_loopback for a in socket.getaddrinfo(host, None))
        except OSError:
            return False
