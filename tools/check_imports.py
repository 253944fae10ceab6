#!/usr/bin/env python3
"""No import cycles in the Python package (python/dynosim) or in any crate of the workspace
(each ``crates/NAME/src`` on its own). Standard library only: it runs before anything is built.

    python3 tools/check_imports.py [--python] [--rust] [--root DIR]

Prints every cycle found, one a line (``python: a -> b -> a``, ``rust dynosim-logs: heroku ->
parse -> heroku``, a crate named by its folder), then a line counting them, and exits 1;
otherwise prints one line, ``OK, no import cycle: ...`` with each part's module and import
counts, and exits 0. With neither ``--python`` nor ``--rust``, both are checked; ``--rust``
is every crate. A part with nothing to check (no python/dynosim, no crates/*/src) is an error,
exit 2: a checker that finds no code must not pass as if the code were clean.

Python: the nodes are the package's modules (a package is its ``__init__.py``); an edge A -> B
when A imports B, relatively or as ``dynosim.B``, at module level or inside a function (a cycle
hidden in a function is still a cycle), except under ``if TYPE_CHECKING:``. ``from . import x``
is an edge to the submodule x when there is one, else to the package. Importing a submodule
runs its parent packages' ``__init__.py`` first, but that is not counted as an edge: a package
importing its own children is fine, a child that imports its parent package (which imports the
child) is a cycle.

Rust: each crate is its own graph (``crate::`` never leaves the crate it is written in); a
crate is a folder of crates/ with a src/. The nodes are the crate's top-level modules, ``x.rs``
or ``x/mod.rs``; every file under ``x/`` belongs to x; lib.rs, the root, is left out. An edge
A -> B when code of A (comments and string literals left out) names ``crate::B``, ``use
crate::{B, ...}``, or reaches B with ``super::`` (``super::`` in ``x/y.rs`` is x itself: no
edge).

A folder listed in ``RUST_FILE_NODES`` is not one node: each of its files is a node of its own,
as a top-level module is (``x/mod.rs`` is ``x``, ``x/y.rs`` is ``x::y``), so that its files
may not reach each other in a ring either. Paths then resolve to the longest module they name:
``super::y::T`` in ``x/z.rs`` is an edge to ``x::y``, ``super::T`` one to ``x``, and in a file
that declares ``mod y;`` a bare ``y::T`` is an edge to its child ``x::y``. The engine's ``sim/``
is listed: one type, ``Simulation``, spread over files by concern, whose concerns' own state
must stand apart from it (``x/mod.rs`` naming a child's state while the child names ``x``'s
``Simulation`` is a cycle). Folders such as ``policy/`` are not: a trait in ``mod.rs``,
implementations in files that name it, and ``mod.rs`` naming them back in its registry is the
pattern they follow on purpose.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

Graph = Dict[str, Set[str]]

ROOT = Path(__file__).resolve().parents[1]
PYTHON_PACKAGE = Path("python") / "dynosim"
RUST_CRATES = Path("crates")
#: Crate (its folder's name) -> its folders whose every file is a node (see the module's notes).
RUST_FILE_NODES: Dict[str, Tuple[str, ...]] = {"dynosim-engine": ("sim",)}


# --- cycles ----------------------------------------------------------------------------------


def find_cycles(graph: Graph) -> List[List[str]]:
    """Cycles of `graph` (node -> the nodes it imports), each as [a, b, ..., a] meaning a
    imports b ... imports a. TopologicalSorter reports one cycle at a time: each one found is
    recorded, one of its edges taken out, and the sort tried again, until none is left. So
    every edge that lies on a cycle is reported in at least one, and each reported cycle is a
    real one; starting at its least node, in a stable order."""
    remaining = {node: set(targets) for node, targets in graph.items()}
    cycles: List[List[str]] = []
    while True:
        # TopologicalSorter takes node -> predecessors: an imported module comes first.
        sorter = TopologicalSorter({node: sorted(remaining[node]) for node in sorted(remaining)})
        try:
            sorter.prepare()
            return cycles
        except CycleError as e:
            found = list(e.args[1])  # [n0, n1, ..., n0] where each is a predecessor of the next
        found.reverse()  # now each node imports the next
        ring = found[:-1]
        start = ring.index(min(ring))
        ring = ring[start:] + ring[:start]
        cycles.append(ring + [ring[0]])
        remaining[ring[-1]].discard(ring[0])  # the edge closing the cycle


def edge_count(graph: Graph) -> int:
    return sum(len(targets) for targets in graph.values())


# --- Python ----------------------------------------------------------------------------------

#: Files that make a module of the package besides .py: the compiled extension (absent before
#: the build) and its stub.
_EXTENSION_SUFFIXES = (".pyi", ".so", ".pyd")


def python_modules(package_dir: Path) -> Dict[str, Optional[Path]]:
    """Dotted module name -> its source file (None for an extension module, which imports
    nothing of the package). Folders without ``__init__.py`` (data) are not packages."""
    top = package_dir.name
    modules: Dict[str, Optional[Path]] = {}

    def walk(folder: Path, prefix: str) -> None:
        modules[prefix] = folder / "__init__.py"
        for path in sorted(folder.iterdir()):
            if path.is_dir():
                if (path / "__init__.py").is_file() and path.name.isidentifier():
                    walk(path, f"{prefix}.{path.name}")
            elif path.suffix == ".py" and path.name != "__init__.py" and path.stem.isidentifier():
                modules[f"{prefix}.{path.stem}"] = path
        for path in sorted(folder.iterdir()):
            stem = path.name.split(".")[0]
            if (path.is_file() and path.name.endswith(_EXTENSION_SUFFIXES) and stem.isidentifier()
                    and f"{prefix}.{stem}" not in modules):
                modules[f"{prefix}.{stem}"] = None

    walk(package_dir, top)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


class _Imports(ast.NodeVisitor):
    """Every import of a module's source, wherever it is, but for ``if TYPE_CHECKING:``
    blocks: (level, module, names) as in ``from ..module import names`` (level 0 and names
    None for ``import module``)."""

    def __init__(self) -> None:
        self.found: List[Tuple[int, str, Optional[List[str]]]] = []

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((0, alias.name, None))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.found.append((node.level, node.module or "", [alias.name for alias in node.names]))

    def visit_Call(self, node: ast.Call) -> None:
        # importlib.import_module("dynosim.x") and __import__("dynosim.x") import too (a name
        # relative to a package given as another argument is not followed).
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if (name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str) and not node.args[0].value.startswith(".")):
            self.found.append((0, node.args[0].value, None))
        self.generic_visit(node)


def python_graph(package_dir: Path) -> Graph:
    """module -> the modules of the package it imports (see the module's notes)."""
    modules = python_modules(package_dir)
    top = package_dir.name
    graph: Graph = {name: set() for name in modules}
    for name, path in modules.items():
        if path is None or not path.is_file():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        visitor = _Imports()
        visitor.visit(tree)
        is_package = path.name == "__init__.py"
        for level, module, names in visitor.found:
            if level:
                parts = name.split(".") if is_package else name.split(".")[:-1]
                if level - 1 > len(parts) - 1:
                    continue  # beyond the top package
                base = ".".join(parts[:len(parts) - (level - 1)])
                target = f"{base}.{module}" if module else base
            else:
                target = module
            if target != top and not target.startswith(top + "."):
                continue
            for dep in _resolve(target, names, modules):
                if dep != name:
                    graph[name].add(dep)
    return graph


def _resolve(target: str, names: Optional[Sequence[str]], modules: Dict[str, Optional[Path]]) -> Iterable[str]:
    """The modules an import of `target` (and `names` from it) loads, as edges: each name
    that is a submodule, else the target itself (or its nearest enclosing module)."""
    while target and target not in modules:
        target = target.rpartition(".")[0]
    if not target:
        return []
    if names is None:
        return [target]
    deps = {f"{target}.{n}" if f"{target}.{n}" in modules else target for n in names}
    return sorted(deps)


def check_python(root: Path) -> Tuple[Graph, List[List[str]]]:
    graph = python_graph(root / PYTHON_PACKAGE)
    return graph, find_cycles(graph)


# --- Rust ------------------------------------------------------------------------------------


def strip_rust(source: str) -> str:
    """The code of a Rust file with comments (doc comments too) and the insides of string
    and character literals blanked out; line breaks kept."""
    out: List[str] = []
    i, n = 0, len(source)

    def blank(text: str) -> str:
        return "".join(c if c == "\n" else " " for c in text)

    while i < n:
        c = source[i]
        if source.startswith("//", i):
            end = source.find("\n", i)
            end = n if end < 0 else end
            out.append(blank(source[i:end]))
            i = end
        elif source.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if source.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif source.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(source[i:j]))
            i = j
        else:
            raw = re.match(r"b?r(#*)\"", source[i:i + 260]) if c in "br" and not _ident_before(source, i) else None
            if raw:
                close = '"' + raw.group(1)
                end = source.find(close, i + raw.end())
                end = n if end < 0 else end + len(close)
                out.append('""' + blank(source[i + 2:end]))
                i = end
            elif c == '"' or (c == "b" and source.startswith('b"', i) and not _ident_before(source, i)):
                j = i + (2 if c == "b" else 1)
                while j < n and source[j] != '"':
                    j += 2 if source[j] == "\\" else 1
                out.append('""' + blank(source[i + 2:j + 1]))
                i = j + 1
            elif c == "'":
                m = re.match(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.)|[^\\'\n])'", source[i:i + 16])
                if m:  # a character literal; otherwise a lifetime or label
                    out.append("' '" + " " * (m.end() - 3))
                    i += m.end()
                else:
                    out.append(c)
                    i += 1
            else:
                out.append(c)
                i += 1
    return "".join(out)


def _ident_before(source: str, i: int) -> bool:
    return i > 0 and (source[i - 1].isalnum() or source[i - 1] == "_")


_IDENT = r"(?:r#)?[A-Za-z_][A-Za-z0-9_]*"
#: An inline module, a brace, or the start of a path from crate, super or self.
_TOKEN = re.compile(
    rf"\bmod\s+(?P<mod>{_IDENT})\s*\{{|(?P<brace>[{{}}])"
    rf"|(?<![\w:])(?P<root>\$crate|crate|super|self)(?=\s*::)"
)
_SEP = re.compile(rf"\s*::\s*(?:(?P<seg>{_IDENT})|(?P<group>\{{))")


def _group_items(code: str, start: int) -> Tuple[List[str], int]:
    """The items of a ``{...}`` use group opening at `start`, split at top-level commas, and
    the position after its closing brace."""
    depth, i, items, begin = 0, start, [], start + 1
    while i < len(code):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                items.append(code[begin:i])
                return [item.strip() for item in items if item.strip()], i + 1
        elif code[i] == "," and depth == 1:
            items.append(code[begin:i])
            begin = i + 1
        i += 1
    return [item.strip() for item in items if item.strip()], len(code)


def rust_paths(code: str, module: List[str], children: Iterable[str] = ()) -> Set[Tuple[str, ...]]:
    """The paths in `code` (stripped, of a file whose module path is `module`) that start at
    crate::, super:: or self:: (or, for the names in `children`, the file's own child
    modules, bare), each resolved from the crate's root as far as its leading names go (a
    ``{...}`` group gives one path an item); inline ``mod name { }`` blocks move super:: and
    self:: as they do in Rust."""
    if children:
        bare = "|".join(re.escape(c) for c in sorted(children))
        code = re.sub(rf"(?<![\w:.$])(?:{bare})(?=\s*::)", lambda m: "self::" + m.group(0), code)
    found: Set[Tuple[str, ...]] = set()
    stack: List[Tuple[List[str], int]] = []  # (module path inside an inline mod, brace depth)
    current, depth, pos = list(module), 0, 0
    while True:
        m = _TOKEN.search(code, pos)
        if not m:
            return found
        pos = m.end()
        if m.group("mod"):
            depth += 1
            stack.append((current, depth))
            current = current + [m.group("mod")]
        elif m.group("brace") == "{":
            depth += 1
        elif m.group("brace") == "}":
            if stack and stack[-1][1] == depth:
                current = stack.pop()[0]
            depth -= 1
        else:
            root = m.group("root")
            base = [] if root in ("crate", "$crate") else current[:-1] if root == "super" else list(current)
            while True:
                sep = _SEP.match(code, pos)
                if not sep:
                    break
                if sep.group("group"):
                    items, pos = _group_items(code, sep.start("group"))
                    for item in items:
                        head = re.match(rf"{_IDENT}(?:\s*::\s*{_IDENT})*", item)
                        names = [n.strip() for n in head.group(0).split("::")] if head else []
                        names = [n for n in names if n != "self"]
                        if names and names[0] in ("super", "crate"):
                            continue
                        if base + names:
                            found.add(tuple(base + names))
                    base = []
                    break
                seg = sep.group("seg")
                pos = sep.end()
                if seg == "super":
                    base = base[:-1]
                elif seg != "self":
                    base = base + [seg]
            if base:
                found.add(tuple(base))


def _node_of(path: Tuple[str, ...], nodes: Set[str]) -> Optional[str]:
    """The longest module of `nodes` that `path` names, if any."""
    for k in range(len(path), 0, -1):
        name = "::".join(path[:k])
        if name in nodes:
            return name
    return None


_MOD_DECLARATION = re.compile(rf"\bmod\s+({_IDENT})\s*;")


def rust_modules(src: Path, split: Iterable[str] = ()) -> Dict[str, List[Tuple[Path, List[str]]]]:
    """Node -> its files, each with its module path (``x/y.rs`` is x::y): a top-level module,
    or in a folder of `split` each file (see the module's notes)."""
    split = set(split)
    modules: Dict[str, List[Tuple[Path, List[str]]]] = {}
    for path in sorted(src.iterdir()):
        if path.is_file() and path.suffix == ".rs" and path.stem not in ("lib", "main"):
            modules.setdefault(path.stem, []).append((path, [path.stem]))
        elif path.is_dir() and ((path / "mod.rs").is_file() or (src / f"{path.name}.rs").is_file()):
            for file in sorted(path.rglob("*.rs")):
                parts = [path.name] + list(file.relative_to(path).with_suffix("").parts)
                if parts[-1] == "mod":
                    parts.pop()
                node = "::".join(parts) if path.name in split else path.name
                modules.setdefault(node, []).append((file, parts))
    return modules


def rust_graph(src: Path, split: Iterable[str] = ()) -> Graph:
    modules = rust_modules(src, split)
    nodes = set(modules)
    graph: Graph = {name: set() for name in modules}
    for name, files in modules.items():
        for path, module in files:
            code = strip_rust(path.read_text(encoding="utf-8"))
            children = set(_MOD_DECLARATION.findall(code))
            for found in rust_paths(code, module, children):
                dep = _node_of(found, nodes)
                if dep is not None and dep != name:
                    graph[name].add(dep)
    return graph


def rust_crates(root: Path) -> List[Path]:
    """Every crate of the workspace: each folder of crates/ with a src/."""
    crates = root / RUST_CRATES
    if not crates.is_dir():
        return []
    return [path for path in sorted(crates.iterdir()) if (path / "src").is_dir()]


def check_rust(crate: Path) -> Tuple[Graph, List[List[str]]]:
    graph = rust_graph(crate / "src", RUST_FILE_NODES.get(crate.name, ()))
    return graph, find_cycles(graph)


# --- the command -----------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description="Fails when the Python package or a crate of the workspace has an import cycle.")
    parser.add_argument("--python", action="store_true", help="check the Python package (python/dynosim)")
    parser.add_argument("--rust", action="store_true", help="check every crate (crates/*/src, each on its own)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this script's)")
    args = parser.parse_args(argv)
    python, rust = (args.python, args.rust) if args.python or args.rust else (True, True)
    parts: List[Tuple[str, Graph, List[List[str]]]] = []  # (label, graph, its cycles)
    if python:
        package = args.root / PYTHON_PACKAGE
        if not (package / "__init__.py").is_file():
            print(f"check_imports: no Python package at {package}", file=sys.stderr)
            return 2
        parts.append(("python", *check_python(args.root)))
    if rust:
        crates = rust_crates(args.root)
        if not crates:
            print(f"check_imports: no crate (crates/*/src) under {args.root}", file=sys.stderr)
            return 2
        parts += [(f"rust {crate.name}", *check_rust(crate)) for crate in crates]
    found, clean = [], []
    for label, graph, cycles in parts:
        for cycle in cycles:
            print(f"{label}: {' -> '.join(cycle)}")
        size = f"{len(graph)} modules, {edge_count(graph)} imports"
        if cycles:
            found.append(f"{len(cycles)} in {label} ({size})")
        else:
            clean.append(f"{label} ({size})")
    if found:
        print("import cycles: " + "; ".join(found) + "".join(f"; none in {c}" for c in clean))
        return 1
    print("OK, no import cycle: " + "; ".join(clean))
    return 0


if __name__ == "__main__":
    sys.exit(main())
