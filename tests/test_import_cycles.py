"""tools/check_imports.py: no import cycle in the Python package (issue #10) or in any crate of the
workspace, each on its own (issue #23: the engine alone was checked, and the log reader had one).

The checker is tried on small trees written here, with and without a cycle, so that these
tests can fail; then on the repository itself."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, run_process

CHECKER = ROOT / "tools" / "check_imports.py"


def check(root: Path, *parts: str) -> subprocess.CompletedProcess:
    return run_process([sys.executable, str(CHECKER), "--root", str(root), *parts], text=True, timeout=120)


def write(root: Path, files: dict) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def package(tmp_path: Path, files: dict) -> Path:
    """A python/dynosim package with `files` (paths relative to the package)."""
    base = {"__init__.py": "from .api import run\n", "api.py": "from . import errors\n", "errors.py": "",
            "_dynosim.pyi": "def f() -> int: ...\n"}
    return write(tmp_path, {f"python/dynosim/{k}": v for k, v in {**base, **files}.items()})


def crate(tmp_path: Path, files: dict, name: str = "dynosim-engine") -> Path:
    """A crates/NAME/src tree with `files` (paths relative to src)."""
    return write(tmp_path, {f"crates/{name}/src/{k}": v for k, v in files.items()})


# --- Python ----------------------------------------------------------------------------------

#: A CLI package laid out as issue #10 asks: verbs share helpers through common, never the entry.
CLI_PACKAGE = {
    "__main__.py": "from .cli import main\nraise SystemExit(main())\n",
    "cli/__init__.py": "from .entry import main\n",
    "cli/entry.py": "from . import common, run, sweep\nfrom .. import errors\n",
    "cli/common.py": "from .. import _dynosim\nfrom ..errors import DynosimError\n",
    "cli/run.py": "from .common import add_scenario_arguments\nfrom ..api import run\n",
    "cli/sweep.py": "from . import common\nfrom ..sweep import Sweep\n",
    "sweep.py": "import dynosim.api\nfrom dynosim.errors import DynosimError\n",
}


def test_a_package_without_cycles_passes(tmp_path):
    result = check(package(tmp_path, CLI_PACKAGE), "--python")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "OK, no import cycle: python (11 modules, 16 imports)\n"


@pytest.mark.parametrize("files, cycle", [
    # Two domain modules importing each other at module level.
    ({"api.py": "from .sweep import Sweep\n", "sweep.py": "from . import api\n"},
     "python: dynosim.api -> dynosim.sweep -> dynosim.api"),
    # A cycle hidden inside a function is still a cycle; so is an absolute import.
    ({"sweep.py": "def main():\n    from dynosim.cli.common import x\n",
      "cli/common.py": "import dynosim.sweep\n"},
     "python: dynosim.cli.common -> dynosim.sweep -> dynosim.cli.common"),
    # A verb importing the entry module, which imports the verb.
    ({"cli/run.py": "from .entry import main\n"},
     "python: dynosim.cli.entry -> dynosim.cli.run -> dynosim.cli.entry"),
    # A child importing its parent package, whose __init__ imports the child.
    ({"cli/run.py": "from . import main\n"},
     "python: dynosim.cli -> dynosim.cli.entry -> dynosim.cli.run -> dynosim.cli"),
    ({"errors.py": "def f():\n    import dynosim\n"},
     "python: dynosim -> dynosim.api -> dynosim.errors -> dynosim"),
])
def test_a_package_with_a_cycle_fails_and_names_it(tmp_path, files, cycle):
    result = check(package(tmp_path, {**CLI_PACKAGE, **files}), "--python")
    assert result.returncode == 1, result.stdout + result.stderr
    assert cycle in result.stdout.splitlines(), result.stdout


def test_imports_for_type_checking_only_are_not_cycles(tmp_path):
    files = {**CLI_PACKAGE, "errors.py": """\
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from .api import run
        else:
            import json
        """}
    assert check(package(tmp_path, files), "--python").returncode == 0


def test_the_extension_module_is_a_module_not_the_package(tmp_path):
    # `from . import _dynosim` in a module the package imports: an edge to _dynosim (known
    # from its stub before the build), not to the package's __init__.
    files = {**CLI_PACKAGE, "api.py": "from . import _dynosim, errors\n"}
    assert check(package(tmp_path, files), "--python").returncode == 0


# --- Rust ------------------------------------------------------------------------------------

ENGINE = {
    "lib.rs": "pub mod error;\npub mod policy;\npub mod rng;\npub mod sim;\npub use sim::run;\n",
    "error.rs": "pub struct Error;\n",
    "rng.rs": "use crate::error::Error;\n",
    "policy/mod.rs": "mod random;\nuse crate::{error::Error, rng};\npub use self::random::Random;\n",
    "policy/random.rs": "use super::Route;\nuse crate::rng::SimRng;\n",
    "sim.rs": """\
        //! Runs a scenario; see [`crate::policy`] and crate::report.
        use crate::policy::{self, Route};
        /// Not [`crate::sim`] (itself) nor crate::nothing.
        const HELP: &str = "crate::rng is not a path in a string";
        fn f<'a>(x: &'a str) -> char { 'c' }
        #[cfg(test)]
        mod tests {
            use super::*;
            /* a block comment naming crate::rng */
        }
        """,
}


def test_a_crate_without_cycles_passes(tmp_path):
    result = check(crate(tmp_path, ENGINE), "--rust")
    assert result.returncode == 0, result.stdout + result.stderr
    # Modules error, policy, rng, sim; edges rng->error, policy->error, policy->rng, sim->policy.
    assert result.stdout == "OK, no import cycle: rust dynosim-engine (4 modules, 4 imports)\n"


@pytest.mark.parametrize("files, cycle", [
    # A `use crate::{...}` group in a file inside a module's folder.
    ({"policy/random.rs": "use crate::{error::Error, sim::Engine};\n"},
     "rust dynosim-engine: policy -> sim -> policy"),
    # A path in code, outside any use.
    ({"error.rs": "fn f() { let _ = crate::sim::run(); }\n"},
     "rust dynosim-engine: error -> sim -> policy -> error"),
    # super:: from a module's mod.rs reaches the crate root, hence another module.
    ({"policy/mod.rs": "use super::sim::Engine;\n"},
     "rust dynosim-engine: policy -> sim -> policy"),
    # A use group spread over lines, nested.
    ({"rng.rs": "use crate::{\n    error::Error,\n    sim::{Engine, run},\n};\n",
      "error.rs": "use crate::rng::SimRng;\n"},
     "rust dynosim-engine: error -> rng -> error"),
])
def test_a_crate_with_a_cycle_fails_and_names_it(tmp_path, files, cycle):
    result = check(crate(tmp_path, {**ENGINE, **files}), "--rust")
    assert result.returncode == 1, result.stdout + result.stderr
    assert cycle in result.stdout.splitlines(), result.stdout


#: The log reader as it was (issue #23): parse dispatches to the formats, which took the types
#: they return from parse.
LOGS = {
    "lib.rs": "pub mod heroku;\npub mod nginx;\npub mod parse;\npub mod record;\n",
    "record.rs": "pub struct Request;\n",
    "parse.rs": "use crate::nginx::Template;\nuse crate::record::Request;\nuse crate::{heroku, route};\n",
    "heroku.rs": "use crate::parse::{Attempt, Reject};\nuse crate::record::Request;\n",
    "nginx.rs": "use crate::record::Request;\n",
}


def test_a_cycle_in_another_crate_than_the_engine_is_found(tmp_path):
    crate(tmp_path, ENGINE)
    crate(tmp_path, LOGS, "dynosim-logs")
    result = check(tmp_path, "--rust")
    assert result.returncode == 1, result.stdout + result.stderr
    # Edges parse->nginx, parse->record, parse->heroku (route is no module here), heroku->parse,
    # heroku->record, nginx->record.
    assert result.stdout.splitlines() == [
        "rust dynosim-logs: heroku -> parse -> heroku",
        "import cycles: 1 in rust dynosim-logs (4 modules, 6 imports); none in rust dynosim-engine (4 modules, 4 imports)",
    ]


def test_the_shared_types_below_both_break_the_cycle(tmp_path):
    crate(tmp_path, ENGINE)
    crate(tmp_path, {**LOGS, "lib.rs": LOGS["lib.rs"] + "pub mod attempt;\n",
                     "attempt.rs": "use crate::record::Request;\n",
                     "parse.rs": "use crate::attempt::Attempt;\n" + LOGS["parse.rs"],
                     "heroku.rs": "use crate::attempt::{Attempt, Reject};\nuse crate::record::Request;\n"},
          "dynosim-logs")
    result = check(tmp_path, "--rust")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ("OK, no import cycle: rust dynosim-engine (4 modules, 4 imports); "
                             "rust dynosim-logs (5 modules, 8 imports)\n")


def test_each_crate_is_a_graph_of_its_own(tmp_path):
    # The engine's policy imports its error; the other crate's error imports its own policy.
    # Two crates, no cycle: `crate::` never leaves the crate it is written in.
    crate(tmp_path, ENGINE)
    crate(tmp_path, {"lib.rs": "mod error;\nmod policy;\n", "error.rs": "use crate::policy::Route;\n",
                     "policy.rs": "pub struct Route;\n"}, "dynosim-other")
    crate(tmp_path, {"lib.rs": "pub fn f() {}\n"}, "dynosim-py")
    (tmp_path / "crates" / "notes").mkdir()  # a folder without src/ is not a crate
    result = check(tmp_path, "--rust")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ("OK, no import cycle: rust dynosim-engine (4 modules, 4 imports); "
                             "rust dynosim-other (2 modules, 1 imports); rust dynosim-py (0 modules, 0 imports)\n")


@pytest.mark.parametrize("part, message", [
    ("--rust", "no crate (crates/*/src)"),
    ("--python", "no Python package"),
])
def test_nothing_to_check_is_an_error_not_a_pass(tmp_path, part, message):
    (tmp_path / "crates" / "empty").mkdir(parents=True)
    result = check(tmp_path, part)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "" and message in result.stderr


def test_by_default_both_parts_are_checked(tmp_path):
    package(tmp_path, {"api.py": "from .sweep import Sweep\n", "sweep.py": "from . import api\n"})
    crate(tmp_path, {**ENGINE, "error.rs": "use crate::sim;\n"})
    result = check(tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "python: dynosim.api -> dynosim.sweep -> dynosim.api"
    assert "rust dynosim-engine: error -> sim -> policy -> error" in lines[1:-1]
    assert lines[-1].startswith("import cycles: 1 in python (") and "in rust dynosim-engine (" in lines[-1]


#: The engine's sim/ folder as it was (issue #38): mod.rs held Simulation and named the CPU's
#: state in cpu.rs, whose Simulation methods named mod.rs back; the folder was one node, so the
#: ring went unseen. Each file of sim/ is a node of its own.
SIM = {
    "lib.rs": "pub mod error;\npub mod sim;\n",
    "error.rs": "pub struct Error;\n",
    "sim/mod.rs": ("mod cpu;\nmod phases;\nuse crate::error::Error;\nuse cpu::Slices;\n"
                   "pub struct Simulation { slices: Slices }\n"),
    "sim/cpu.rs": "use super::Simulation;\npub struct Slices;\nimpl Simulation { fn cpu_add(&mut self) {} }\n",
    "sim/phases.rs": "use super::{cpu::Slices, Simulation};\n",
}


@pytest.mark.parametrize("files, cycle, size", [
    ({}, "sim -> sim::cpu -> sim", "4 modules, 5 imports"),
    # The child named with self:: rather than bare.
    ({"sim/mod.rs": "mod cpu;\nmod phases;\npub struct Simulation { slices: self::cpu::Slices }\n"},
     "sim -> sim::cpu -> sim", "4 modules, 4 imports"),
    # Through a sibling: mod.rs names phases, which names cpu, which names mod.rs.
    ({"sim/mod.rs": "mod cpu;\nmod phases;\npub struct Simulation { x: phases::X }\n",
      "sim/cpu.rs": "use super::Simulation;\npub struct Slices;\n",
      "sim/phases.rs": "use super::cpu::Slices;\npub struct X;\n"},
     "sim -> sim::phases -> sim::cpu -> sim", "4 modules, 3 imports"),
])
def test_each_file_of_the_engine_s_sim_folder_is_a_node(tmp_path, files, cycle, size):
    result = check(crate(tmp_path, {**SIM, **files}), "--rust")
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines() == [f"rust dynosim-engine: {cycle}",
                                          f"import cycles: 1 in rust dynosim-engine ({size})"]


def test_a_concern_s_state_apart_from_simulation_breaks_the_ring(tmp_path):
    # cpu.rs keeps the state alone; the Simulation methods that use it are phases.rs'.
    files = {**SIM, "sim/cpu.rs": "pub struct Slices;\nimpl Slices { pub fn add(&mut self) {} }\n",
             "sim/phases.rs": "use super::cpu::Slices;\nuse super::Simulation;\n"
                              "impl Simulation { fn cpu_add(&mut self) {} }\n"}
    result = check(crate(tmp_path, files), "--rust")
    assert result.returncode == 0, result.stdout + result.stderr
    # Edges sim->error, sim->sim::cpu, sim::phases->sim::cpu, sim::phases->sim.
    assert result.stdout == "OK, no import cycle: rust dynosim-engine (4 modules, 4 imports)\n"


def test_a_registry_folder_stays_one_node(tmp_path):
    # policy/ is not listed: its mod.rs naming its implementations, which name its trait, is
    # its pattern, not a ring. The same files under sim/ are one.
    registry = {"lib.rs": "pub mod policy;\npub mod sim;\n",
                "policy/mod.rs": "mod random;\npub trait Route {}\npub use random::Random;\n",
                "policy/random.rs": "use super::Route;\npub struct Random;\n",
                "sim/mod.rs": "mod random;\npub trait Route {}\npub use random::Random;\n",
                "sim/random.rs": "use super::Route;\npub struct Random;\n"}
    result = check(crate(tmp_path, registry), "--rust")
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines()[:-1] == ["rust dynosim-engine: sim -> sim::random -> sim"]


# --- this repository -------------------------------------------------------------------------


def test_the_python_package_has_no_import_cycle():
    result = check(ROOT, "--python")
    assert result.returncode == 0, result.stdout
    assert result.stdout.startswith("OK, no import cycle: python (")


def test_every_crate_of_the_workspace_has_no_import_cycle():
    result = check(ROOT, "--rust")
    assert result.returncode == 0, result.stdout
    assert result.stdout.startswith("OK, no import cycle: rust ")
    crates = sorted(path.parent.name for path in (ROOT / "crates").glob("*/src"))
    assert "dynosim-engine" in crates and "dynosim-logs" in crates
    for name in crates:
        assert f"rust {name} (" in result.stdout, result.stdout
