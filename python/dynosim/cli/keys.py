"""`dynosim keys`: every scenario key with its type, unit, default and meaning, in the
terminal or as Markdown (docs/scenario.md); the reference is :mod:`dynosim.keys`."""

from __future__ import annotations

import argparse

from ..display import stdout_console
from ..keys import markdown


def register(commands: argparse._SubParsersAction) -> None:
    help = "List every scenario key: type, unit, default and meaning."
    p = commands.add_parser("keys", help=help, description=help)
    p.add_argument("--markdown", action="store_true", help="print it as Markdown (docs/scenario.md)")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    text = markdown()
    if args.markdown:
        print(text, end="")
        return 0
    from rich.markdown import Markdown

    stdout_console().print(Markdown(text))
    return 0
