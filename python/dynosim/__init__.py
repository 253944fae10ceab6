"""dynosim: a discrete-event simulator and capacity planner for request routing across dynos.

>>> import dynosim
>>> results = dynosim.run("rapgenius", policies=["random", "intelligent"])
>>> results["random"].estimate("queue.mean")          # doctest: +SKIP
"""

from ._dynosim import __version__
from .api import run
from .errors import DynosimError, LogError, NotSteadyWarning, OverloadedError, ScenarioError, UnstableError
from .results import METRICS, Estimate, PolicyResult, Results
from .scenario import Scenario, builtin_scenarios

__all__ = [
    "__version__",
    "run",
    "Scenario",
    "builtin_scenarios",
    "Results",
    "PolicyResult",
    "Estimate",
    "METRICS",
    "DynosimError",
    "ScenarioError",
    "UnstableError",
    "OverloadedError",
    "LogError",
    "NotSteadyWarning",
]
