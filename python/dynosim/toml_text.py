"""TOML text from a document: the fitted scenario of `dynosim logs fit`, and a scenario with
its overrides applied in the HTML report (and the playground's "download TOML").

Top-level keys first, then a ``[table]`` per table, ``[[table]]`` per list of tables (such as
``[[fleet.deploy]]`` and ``[[request.class]]``); other lists and tables inline. Reading the text
back (tomllib) gives the same document: tested."""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Mapping


def value(v: Any) -> str:
    """A TOML value (strings, numbers, lists and tables inline)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{key(k)} = {value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"not a TOML value: {v!r}")


def key(k: str) -> str:
    """A bare key when it can be one, else quoted."""
    return k if k and k.replace("_", "").replace("-", "").isalnum() and k.isascii() else json.dumps(k)


def toml_text(doc: Mapping[str, Any]) -> str:
    """The whole document as TOML."""
    lines: List[str] = []
    _table(doc, [], lines)
    return "\n".join(lines).strip() + "\n"


def _is_table_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, Mapping) for x in v)


def _table(doc: Mapping[str, Any], path: List[str], lines: List[str]) -> None:
    nested: Dict[str, Any] = {}
    for k, v in doc.items():
        if isinstance(v, Mapping) or _is_table_list(v):
            nested[k] = v
        else:
            lines.append(f"{key(k)} = {value(v)}")
    for k, v in nested.items():
        name = ".".join(key(p) for p in [*path, k])
        if isinstance(v, Mapping):
            lines += ["", f"[{name}]"]
            _table(v, [*path, k], lines)
        else:
            for item in v:
                lines += ["", f"[[{name}]]"]
                _table(item, [*path, k], lines)
