"""`dynosim init [FILE]`: write a commented starter scenario (:func:`dynosim.starter.starter`)
to edit; an existing file is left alone unless ``--force``."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import DynosimError
from ..starter import DEFAULT_FILE, starter
from ..output import write_files


def register(commands: argparse._SubParsersAction) -> None:
    help = "Write a commented starter scenario to edit (it runs as it is)."
    p = commands.add_parser("init", help=help, description=help + " Every key: dynosim keys.")
    p.add_argument("file", nargs="?", default=DEFAULT_FILE, metavar="FILE",
                   help=f"the scenario file to write (default: {DEFAULT_FILE})")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if path.suffix != ".toml":
        raise DynosimError(f"expected a file name ending in .toml, got {args.file!r}", file="init")
    if path.is_dir():
        raise DynosimError("is a directory; expected a file name such as my-app.toml", file=args.file)
    if path.exists() and not args.force:
        raise DynosimError("already exists; --force overwrites it", file=args.file)
    if not (path.parent if str(path.parent) else Path(".")).is_dir():
        raise DynosimError(f"no such directory: {path.parent}", file=str(path))
    text = starter(path.stem)
    try:
        write_files({path: lambda tmp: tmp.write_text(text, encoding="utf-8")}, option="init",
                    overwrite=args.force)
    except FileExistsError:
        raise DynosimError("already exists; --force overwrites it", file=str(path)) from None
    print(f"wrote {path}: edit it, then `dynosim run {path}` (every key: `dynosim keys`)")
    return 0
