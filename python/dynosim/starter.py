"""The commented starter scenario that ``dynosim init`` writes, to edit; it runs as it is.

It has every section (arrivals, service, fleet, router, run, cost) and a commented example of
``[[cases]]``; ``name`` is the file's name.
"""

from __future__ import annotations

import json
from importlib import resources

DEFAULT_FILE = "my-app.toml"


def starter(name: str) -> str:
    """The starter scenario's text, named `name`."""
    template = resources.files("dynosim").joinpath("templates", "scenario.toml").read_text(encoding="utf-8")
    # A JSON string of a name is a valid TOML basic string.
    return template.replace("__NAME__", json.dumps(name))
