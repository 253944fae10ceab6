"""`dynosim scenarios`: the built-in scenarios, usable by name wherever a file is."""

from __future__ import annotations

import argparse

from ..scenario import builtin_scenarios


def register(commands: argparse._SubParsersAction) -> None:
    help = "List the built-in scenarios."
    p = commands.add_parser("scenarios", help=help, description=help)
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    for name, description in builtin_scenarios().items():
        print(f"{name:20} {description}")
    return 0
