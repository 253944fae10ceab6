"""Production router logs: read Heroku, HAProxy and nginx logs, summarise them
(:func:`summary`), fit a scenario to them (:func:`fit`, which also fits traces, spans as JSON
lines, into services and their calls: :func:`fit_spans`), and replay them through another
fleet (:func:`replay`). One module per verb of ``dynosim logs`` (:mod:`.summary`, :mod:`.fit`,
:mod:`.replay`), and what reading takes in :mod:`.reading`.

>>> from dynosim import logs
>>> s = logs.summary("tests/fixtures/logs/heroku.log")      # doctest: +SKIP
>>> s["requests"], s["service"]["p99"]                      # doctest: +SKIP
(9, 30.0)

The reading is the Rust crate ``dynosim-logs``: one pass, line by line, in bounded memory,
with the GIL released (Ctrl-C stops it). The summary is a dict, the document
``dynosim logs summary --json`` prints; its fields, the formats read and what is assumed of
each are in docs/logs.md.

The package's names are the functions (``logs.fit`` is :func:`fit`, not its module); a
module's other names are imported from it: ``from dynosim.logs.fit import quantile_table``.
"""

from .fit import Fit, fit, fit_spans
from .reading import FORMATS
from .replay import ReplayResults, replay
from .summary import plot, summary, write_plot

__all__ = ["summary", "fit", "fit_spans", "replay", "Fit", "ReplayResults", "FORMATS", "plot", "write_plot"]
