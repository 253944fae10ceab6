"""`dynosim animate`: being written (issue 3)."""

from __future__ import annotations

import argparse


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("animate", help="Animate per-dyno queues, random and intelligent side by side.", description="Animate per-dyno queues, random and intelligent side by side.")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    raise NotImplementedError("dynosim animate is not written yet")
