"""The ``dynosim`` command (the console script ``dynosim = dynosim.cli:main``).

One module per verb (run, compare, scenarios, init, demo, capacity, sweep, animate, keys), the
helpers they share in :mod:`dynosim.cli.common`, and :mod:`dynosim.cli.entry`, which builds the
parser from the verbs and runs one: ``main(argv)`` returns the exit code.
"""

from .entry import main

__all__ = ["main"]
