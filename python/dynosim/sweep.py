"""`dynosim sweep`: being written (issue 3)."""

from __future__ import annotations

import argparse


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("sweep", help="Run a scenario over ranges of keys; write CSV, JSON and a plot.", description="Run a scenario over ranges of keys; write CSV, JSON and a plot.")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    raise NotImplementedError("dynosim sweep is not written yet")
