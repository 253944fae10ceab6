"""Every scenario key with its type, unit, default and meaning (what ``dynosim keys`` prints).

The reference comes from the engine's schema (``crates/dynosim-engine/src/schema.rs``), which
the engine's tests hold to the keys it validates; docs/scenario.md is this module's
:func:`markdown`, and a test fails when the two differ.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

from . import _dynosim

REGENERATE = "dynosim keys --markdown > docs/scenario.md"


def reference() -> Dict[str, Any]:
    """The engine's schema: ``formats``, ``sections``, ``kinds`` and ``keys``."""
    doc: Dict[str, Any] = json.loads(_dynosim.keys())
    return doc


def markdown() -> str:
    """The reference as Markdown, as committed in docs/scenario.md."""
    ref = reference()
    out = [
        "# Scenario keys",
        "",
        f"<!-- Generated from crates/dynosim-engine/src/schema.rs by `{REGENERATE}`: edit the "
        "schema, not this file. -->",
        "",
        "A scenario is a TOML file; `dynosim init my-app.toml` writes a commented one to start "
        "from. Any key can be changed for one run with `--set key.path=value` "
        "(e.g. `--set fleet.dynos=150`). `dynosim keys` prints this page.",
        "",
    ]
    for fmt in ref["formats"]:
        out.append(f"- A **{fmt['name']}** is {fmt['meaning']}.")
    out.append("")
    for section in ref["sections"]:
        name = section["name"]
        if not name:
            out.append("## Top level")
        else:
            out.append(f"## `[[{name}]]`" if section["array"] else f"## `[{name}]`")
        out += ["", section["meaning"], ""]
        own = [k for k in ref["keys"] if k["section"] == name and k["kind"] is None]
        kind_key = section["kind_key"]
        out += _table(own, kind_key, [k["name"] for k in ref["kinds"] if k["section"] == name])
        for kind in (k for k in ref["kinds"] if k["section"] == name):
            out += ["", f"### `{kind_key} = \"{kind['name']}\"`", "", _sentence(kind["meaning"]), ""]
            params = [k for k in ref["keys"] if k["section"] == name and k["kind"] == kind["name"]]
            out += _table(params, None, []) if params else ["No parameters."]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _table(keys: List[Dict[str, Any]], kind_key: Any, kinds: List[str]) -> List[str]:
    rows = ["| key | type | unit | default | meaning |", "|---|---|---|---|---|"]
    for k in keys:
        meaning = k["meaning"]
        if k["name"] == kind_key:
            meaning += ": " + ", ".join(f"`{name}`" for name in kinds)
        rows.append(f"| `{k['name']}` | {k['type']} | {k['unit']} | {_default(k)} | {meaning} |")
    return rows


def _default(key: Dict[str, Any]) -> str:
    if key["required"]:
        return "required"
    default = key["default"]
    if default is None:
        return "none"
    # A default written as a value (JSON text) is shown as in a scenario file.
    try:
        json.loads(default)
    except ValueError:
        return str(default)
    return f"`{default}`"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
