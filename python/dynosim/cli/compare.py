"""`dynosim compare`: several routing policies side by side on the same traffic; ``dynosim
run`` with ``--policy`` required (its handler and table are :mod:`dynosim.cli.run`'s)."""

from __future__ import annotations

import argparse

from .common import policy_list, policy_names
from .run import scenario_command


def register(commands: argparse._SubParsersAction) -> None:
    p = scenario_command(commands, "compare", "Run several routing policies side by side on the same traffic.")
    p.add_argument("--policy", type=policy_list, required=True, metavar="P1,P2",
                   help=f"routing policies to compare ({', '.join(policy_names())})")
