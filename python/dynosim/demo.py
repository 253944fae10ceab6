"""`dynosim demo`: the seed study's table and headline, reproduced.

Rap Genius (2013) simulated intelligent routing at 50, 60 and 75 dynos and random routing at
75 to 10,000 dynos, 5 simulated minutes each, and concluded that "if your app needs 80 dynos
with an intelligent router, it needs 4,000 with a random router". This prints the same table
(with 95% confidence intervals over replications) and the dynos each policy needs for a mean
queue time of at most 10 ms, their ratio and their monthly cost.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple

from .api import run as run_scenario
from .results import PolicyResult
from .scenario import Scenario

#: The article's configurations.
ARTICLE_ROWS: List[Tuple[str, int]] = (
    [("intelligent", n) for n in (50, 60, 75)]
    + [("random", n) for n in (75, 100, 150, 200, 500, 1000, 5000, 10000)]
)
#: What the article published for random routing at 75 dynos.
ARTICLE_RANDOM_75 = {"queued_fraction": 0.62, "queue_of_queued.mean": 2.763}
HEADLINE_TARGET = "queue.mean <= 10ms"


def table(scenario: Scenario, on_row: Optional[Callable[[int], None]] = None) -> List[Tuple[str, int, PolicyResult]]:
    """Runs the article's configurations on the scenario (same seed, same traffic);
    ``on_row(rows done)`` after each."""
    rows = []
    for policy, dynos in ARTICLE_ROWS:
        variant = scenario.with_overrides({"router.policy": policy, "fleet.dynos": dynos})
        rows.append((policy, dynos, run_scenario(variant)[0]))
        if on_row:
            on_row(len(rows))
    return rows
