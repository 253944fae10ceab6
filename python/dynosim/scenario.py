"""Scenarios: loading (a built-in name, a TOML file or a dict), overrides, validation.

The schema itself lives in the engine (one definition, in Rust); this module reads TOML,
applies ``key.path=value`` overrides, and hands the document to the engine as JSON. Errors
come back with the key path and are raised as :class:`~dynosim.errors.ScenarioError` naming
the file (or ``--set`` for a key that an override wrote).
"""

from __future__ import annotations

import copy
import datetime
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

from . import _dynosim
from .cost import Pricing, service_pricing
from .errors import ScenarioError, from_engine

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["Scenario", "builtin_scenarios", "parse_override"]

ScenarioLike = Union["Scenario", str, Path, Mapping[str, Any]]

OVERRIDE_SOURCE = "--set"

#: Sections read by the Python layer and not passed to the engine: prices (see
#: :mod:`dynosim.cost`) and labelled variants of the scenario (``[[cases]]``).
PYTHON_SECTIONS = ("cost", "cases")

#: Sections that are tables of keys.
TABLES = ("arrivals", "service", "request", "fleet", "app", "resources", "router", "autoscale", "run", "cost",
          "services")

#: ``router.policy`` when the scenario leaves it out: the engine's default (random routing, as
#: Heroku's router does; crates/dynosim-engine/src/scenario.rs).
DEFAULT_POLICY = "random"

#: How deeply a scenario's values may nest (tables and lists); the deepest real key,
#: ``service.percentiles[i][j]``, is three levels down.
MAX_DEPTH = 16

#: Keys naming a section's kind, with the keys of that section that every kind shares. An
#: override that changes the kind drops the old kind's parameters (a Weibull given with
#: ``--set`` replaces the file's percentile table rather than clashing with it).
KIND_KEYS = {
    "service.distribution": ("round_up", "clip"),
    # Bursts go on top of any open process, and keys with any process: a new process keeps them.
    "arrivals.process": ("burst", "keys"),
    # Another autoscale rule keeps the fleet's range and drops the old rule's settings.
    "autoscale.rule": ("min", "max", "interval"),
}


def builtin_scenarios() -> Dict[str, str]:
    """Built-in scenario names and their one-line descriptions."""
    out = {}
    for entry in sorted(resources.files("dynosim").joinpath("scenarios").iterdir(), key=str):
        if entry.name.endswith(".toml"):
            doc = tomllib.loads(entry.read_text(encoding="utf-8"))
            out[entry.name[: -len(".toml")]] = str(doc.get("description", ""))
    return out


def parse_override(text: str) -> tuple:
    """Splits ``"fleet.dynos=100"`` into ``("fleet.dynos", 100)``.

    The value is read as a TOML value (numbers, booleans, strings in quotes, lists); anything
    that is not valid TOML is taken as a plain string, so ``router.policy=intelligent`` and
    ``run.duration=10min`` need no quotes.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ScenarioError(f"expected key.path=value, got {text!r}", file=OVERRIDE_SOURCE)
    raw = raw.strip()
    try:
        parsed = tomllib.loads(f"v = {raw}")
    except tomllib.TOMLDecodeError:
        return key, raw
    except RecursionError:
        raise ScenarioError(f"the value is nested more than {MAX_DEPTH} levels deep", file=OVERRIDE_SOURCE,
                            path=key) from None
    # "5\nx = 1" is valid TOML with two keys: one value was meant, so it is text.
    return key, parsed["v"] if list(parsed) == ["v"] else raw


class Scenario:
    """A scenario document and where it came from.

    Build one with :meth:`load`; derive variants with :meth:`with_overrides` (scenarios are
    never changed in place).
    """

    def __init__(
        self,
        doc: Mapping[str, Any],
        *,
        source: Optional[str] = None,
        base_dir: Union[str, Path] = ".",
        overridden: Iterable[str] = (),
    ) -> None:
        self.source = source
        self.base_dir = Path(base_dir)
        self.overridden = frozenset(overridden)
        self._check_values(doc)
        self.doc: Dict[str, Any] = copy.deepcopy(dict(doc))
        self._check_python_sections()

    @classmethod
    def load(cls, ref: ScenarioLike) -> "Scenario":
        """A built-in scenario by name, a TOML file by path, or a dict."""
        if isinstance(ref, Scenario):
            return ref
        if isinstance(ref, Mapping):
            return cls(ref, source=None)
        if "\x00" in str(ref):
            raise ScenarioError("a file name cannot contain a NUL character", file=repr(str(ref)))
        path = Path(ref)
        if path.suffix != ".toml" and not path.exists():
            builtin = resources.files("dynosim").joinpath("scenarios", f"{ref}.toml")
            if builtin.is_file():
                return cls._from_text(builtin.read_text(encoding="utf-8"), str(ref), Path("."))
            known = ", ".join(builtin_scenarios())
            raise ScenarioError(
                f"no such file, nor a built-in scenario of that name (built-ins: {known})",
                file=str(ref),
            )
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ScenarioError(f"cannot read the scenario: {e.strerror}", file=str(ref)) from None
        except UnicodeDecodeError:
            raise ScenarioError("not a UTF-8 text file", file=str(ref)) from None
        return cls._from_text(text, str(ref), path.parent)

    @classmethod
    def _from_text(cls, text: str, source: str, base_dir: Path) -> "Scenario":
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ScenarioError(f"invalid TOML: {e}", file=source) from None
        except RecursionError:
            raise ScenarioError(f"invalid TOML: nested more than {MAX_DEPTH} levels deep", file=source) from None
        return cls(doc, source=source, base_dir=base_dir)

    @property
    def name(self) -> str:
        return str(self.doc.get("name") or (Path(self.source).stem if self.source else "scenario"))

    def with_overrides(
        self, overrides: Union[Mapping[str, Any], Iterable[str], None] = None
    ) -> "Scenario":
        """A copy with keys set, from ``{"fleet.dynos": 100}`` or ``["fleet.dynos=100"]``."""
        if not overrides:
            return self
        items = (
            list(overrides.items())
            if isinstance(overrides, Mapping)
            else [parse_override(o) for o in overrides]
        )
        doc = copy.deepcopy(self.doc)
        for key, value in items:
            shared = KIND_KEYS.get(key)
            section = doc.get(key.split(".")[0])
            if shared is not None and isinstance(section, dict) and section.get(key.split(".")[1]) != value:
                for old in [k for k in section if k not in shared]:
                    del section[old]
            if key.endswith(".file") and isinstance(value, str):
                if "\x00" in value:
                    raise ScenarioError("a file name cannot contain a NUL character", file=self.source, path=key)
                # Paths in a file are relative to that file; paths typed on the command line
                # are relative to where they were typed.
                value = str(Path(value).resolve())
            _set_path(doc, key, value)
        return Scenario(
            doc,
            source=self.source,
            base_dir=self.base_dir,
            overridden=self.overridden | {k for k, _ in items},
        )

    def _check_values(self, doc: Mapping[str, Any]) -> None:
        """Sections are tables, and every value is one the engine can read: no TOML dates or
        times, nothing nested deeper than MAX_DEPTH."""
        if not isinstance(doc, Mapping):
            raise ScenarioError(f"expected a table of sections, got {_kind(doc)}", file=self.source)
        for name in TABLES:
            if name in doc and not isinstance(doc[name], Mapping):
                raise self._error(name, f"expected a table [{name}] of keys, got {_kind(doc[name])}")
        stack: List[tuple] = [(doc, "", 0)]
        while stack:
            value, path, depth = stack.pop()
            if depth > MAX_DEPTH:
                raise self._error(path, f"nested more than {MAX_DEPTH} levels deep")
            if isinstance(value, Mapping):
                stack += [(v, f"{path}.{k}" if path else str(k), depth + 1) for k, v in value.items()]
            elif isinstance(value, (list, tuple)):
                stack += [(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
            elif not (value is None or isinstance(value, (str, int, float))):
                raise self._error(path, f"expected a number, a string, a list or a table, got {_kind(value)}")

    def _check_python_sections(self) -> None:
        """The sections the engine does not read (``[cost]``, ``[[cases]]``) are checked here,
        on load, whatever the verb: a scenario is valid or not as a whole, as ``haproxy -c``
        checks a whole file, so ``run`` refuses a price that ``capacity`` would refuse."""
        try:
            if "cost" in self.doc:
                Pricing.from_scenario(self.doc, self.source)
            self._check_services_cost()
            self.cases  # each case's overrides, which make scenarios checked in turn
        except ScenarioError as e:
            if self._overridden(e.path):
                e.file = OVERRIDE_SOURCE
            raise

    def _check_services_cost(self) -> None:
        """Each service's ``[services.NAME.cost]``, checked as the top level's is, at its own
        key path."""
        for name, service in (self.doc.get("services") or {}).items():
            if not isinstance(service, Mapping):
                raise self._error(f"services.{name}", f"expected a table [services.{name}] of keys, "
                                                      f"got {_kind(service)}")
            if "cost" in service:
                service_pricing(self.doc, name, self.source)

    def without_autoscale(self) -> "Scenario":
        """The scenario without its ``[autoscale]`` section (itself when it has none): the fixed
        fleet of ``fleet.dynos`` dynos that ``capacity`` sizes and ``tune`` compares against."""
        if "autoscale" not in self.doc:
            return self
        doc = {k: v for k, v in self.doc.items() if k != "autoscale"}
        return Scenario(doc, source=self.source, base_dir=self.base_dir,
                        overridden={k for k in self.overridden if k.split(".")[0] != "autoscale"})

    @property
    def policies(self) -> List[str]:
        """The routing policies to run: ``router.policy`` as a list (``random`` when the
        scenario leaves it out, as the engine does)."""
        policy = self.doc.get("router", {}).get("policy", DEFAULT_POLICY)
        if isinstance(policy, list):
            if not policy or not all(isinstance(p, str) for p in policy):
                raise self._error("router.policy", "expected a policy name or a non-empty list of names")
            return list(policy)
        if isinstance(policy, str):
            return [policy]
        raise self._error("router.policy", f"expected a policy name or a list of names, got {policy!r}")

    def for_policy(self, policy: str) -> "Scenario":
        """This scenario with a single routing policy."""
        doc = copy.deepcopy(self.doc)
        doc.setdefault("router", {})["policy"] = policy
        return Scenario(doc, source=self.source, base_dir=self.base_dir, overridden=self.overridden)

    def to_json(self) -> str:
        """The document the engine reads (without the Python layer's sections), named: a file
        without ``name`` is called after the file, as the key reference says."""
        doc = {k: v for k, v in self.doc.items() if k not in PYTHON_SECTIONS}
        if "name" not in doc and self.source:
            doc["name"] = self.name
        return json.dumps(doc)

    @property
    def cases(self) -> List[tuple]:
        """Labelled variants, ``[[cases]]`` with ``label`` and ``set`` (keys to override), as
        ``(label, Scenario)`` pairs; empty when the scenario has none."""
        raw = self.doc.get("cases")
        if raw is None:
            return []
        if not isinstance(raw, list) or not raw:
            raise self._error("cases", "expected a non-empty array of tables [[cases]]")
        out = []
        for i, case in enumerate(raw):
            where = f"cases[{i}]"
            if not isinstance(case, dict):
                raise self._error(where, "expected a table with label and set")
            unknown = set(case) - {"label", "set"}
            if unknown:
                raise self._error(f"{where}.{sorted(unknown)[0]}", "unknown key; expected label or set")
            label = case.get("label")
            if not isinstance(label, str) or not label:
                raise self._error(f"{where}.label", "expected a non-empty string")
            overrides = case.get("set", {})
            if not isinstance(overrides, dict):
                raise self._error(f"{where}.set", "expected a table of key.path = value")
            base = Scenario({k: v for k, v in self.doc.items() if k != "cases"}, source=self.source,
                            base_dir=self.base_dir, overridden=self.overridden)
            out.append((label, base.with_overrides(_flatten(overrides))))
        return out

    def describe(self) -> Dict[str, Any]:
        """Validates the scenario (first policy) and returns what the engine made of it:
        arrival rate, service mean and second moment, offered load and its ``bottleneck``
        (threads, cores, interpreter lock, resource, pool), whether a run would go ahead
        (``stable``; a ``closed_loop`` always does), the fleet's lifecycle as it resolved it
        (``fleet``: ``boot_time``'s mean, ``boot_timeout``, ``stop_delay``, ``shutdown_grace``, in
        seconds), the services a request calls (``services``: each ``[services.NAME]`` with the
        calls/s its callers send it and its fleet) and the call graph (``calls``: each call phase,
        its ``caller``, None for the top level, ``callee`` and settings), and ``refused``: why no
        run goes ahead whatever the load (a fan-out between services, not simulated yet), or None...
        (``dynosim_engine::description``, docs/services.md)."""
        single = self.for_policy(self.policies[0])
        return json.loads(single._call(_dynosim.describe))

    def check_runnable(self, described: Optional[Dict[str, Any]] = None, *, simulated: bool = False) -> None:
        """Raises :class:`ScenarioError` when no run of this scenario goes ahead whatever its
        load: a fan-out between services, which is not simulated yet (docs/services.md). Every
        run refuses them in the engine too; this says so before any warning or any process
        starts. Unless the run is `simulated`, services are refused too: the real stack does
        not run calls between services yet."""
        info = described if described is not None else self.describe()
        refused = info.get("refused")
        if refused:
            raise self._error(refused["path"], refused["message"])
        if not simulated and info.get("services"):
            raise self._error("services", "the real stack does not run calls between services yet; "
                                          "simulate them with dynosim run (docs/services.md)")

    def steady_state_warning(self, described: Optional[Dict[str, Any]] = None) -> Optional[str]:
        """Why this scenario's figures may not be steady state, or None.

        Queues near capacity take long to settle: the relaxation time t (the engine's
        heavy-traffic estimate, docs/model.md) grows as 1/(1 − ρ)². A warm-up shorter than t
        measures the queues while they still fill from empty (a bias the replications'
        intervals do not show, over about t of the window: warned when t is more than 5% of
        the window), and a window shorter than t averages a stretch too short to
        stand for the long run. Longer windows only narrow the intervals, which say so."""
        from .display import duration

        info = described if described is not None else self.describe()
        t = info.get("relaxation_time")
        if t is None:
            return None
        # The empty start biases about t of the window: past a warm-up of t it is gone, and
        # within 5% of the window it is small (a burst scenario that starts empty on purpose).
        cold_start = info["warmup"] < t and t > info["duration"] / 20
        if not cold_start and info["duration"] >= t:
            return None
        return (f"offered load {info['offered_load']:.3f}: the queues take about {duration(t)} of simulated "
                f"time to settle (relaxation time), against a warm-up of {duration(info['warmup'])} and a "
                f"duration of {duration(info['duration'])}; the figures may not be steady state "
                f"(want run.warmup and run.duration >= {duration(t)},"
                f" or fewer busy slots: more dynos)")

    def validate(self) -> "Scenario":
        """Raises :class:`ScenarioError` unless every policy's variant of it is valid."""
        for policy in self.policies:
            self.for_policy(policy)._call(_dynosim.describe)
        return self

    def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(self.to_json(), str(self.base_dir), *args)
        except _dynosim.EngineError as e:
            raise self._mapped(e) from None

    def _mapped(self, error: Exception) -> BaseException:
        mapped = from_engine(error, file=self.source)
        if self._overridden(getattr(mapped, "path", "")):
            mapped.file = OVERRIDE_SOURCE  # type: ignore[attr-defined]
        return mapped

    def _error(self, path: str, message: str) -> ScenarioError:
        source = OVERRIDE_SOURCE if self._overridden(path) else self.source
        return ScenarioError(message, file=source, path=path)

    def _overridden(self, path: str) -> bool:
        """Whether an override wrote the value at `path`: the key itself, a table holding it,
        or a key inside it."""
        return bool(path) and any(path == k or path.startswith((k + ".", k + "[")) or k.startswith(path + ".")
                                  for k in self.overridden)

    def __repr__(self) -> str:
        return f"Scenario({self.name!r}, source={self.source!r})"


def _kind(value: Any) -> str:
    """What a value is, in TOML's words, for error messages."""
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, (datetime.date, datetime.time)):
        return f"a date/time ({value.isoformat()})"
    return type(value).__name__


def _set_path(doc: Dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    if any(not p for p in parts):
        raise ScenarioError(f"invalid key path {key!r}", file=OVERRIDE_SOURCE)
    # A number after an array of tables names one of its tables: faults.0.for is the first
    # [[faults]] table's `for`.
    node: Any = doc
    for i, part in enumerate(parts[:-1]):
        where = ".".join(parts[: i + 1])
        if isinstance(node, list):
            node = node[_index(node, part, where, key)]
            continue
        child = node.setdefault(part, {})
        if isinstance(child, list) and child and all(isinstance(t, dict) for t in child):
            node = child
            continue
        if not isinstance(child, dict):
            raise ScenarioError(f"{where} is a value, not a table; cannot set {key}", file=OVERRIDE_SOURCE, path=key)
        node = child
    if isinstance(node, list):
        raise ScenarioError(f"{'.'.join(parts[:-1])} is an array of tables; name one of them and its key "
                            f"({'.'.join(parts[:-1])}.0.KEY)", file=OVERRIDE_SOURCE, path=key)
    node[parts[-1]] = value


def _index(tables: List[Any], part: str, where: str, key: str) -> int:
    """The table of an array of tables that a key path's number names."""
    if not part.isdigit():
        raise ScenarioError(f"{where.rsplit('.', 1)[0]} is an array of tables: expected a table's number "
                            f"(0 to {len(tables) - 1}) after it, got {part!r}", file=OVERRIDE_SOURCE, path=key)
    i = int(part)
    if i >= len(tables):
        raise ScenarioError(f"{where.rsplit('.', 1)[0]} has {len(tables)} table(s), numbered from 0: there is no "
                            f"table {i}", file=OVERRIDE_SOURCE, path=key)
    return i


def _flatten(table: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    """``{"fleet": {"dynos": 15}}`` (TOML's dotted keys) → ``{"fleet.dynos": 15}``."""
    out: Dict[str, Any] = {}
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, path + "."))
        else:
            out[path] = value
    return out
