"""The rule of the real-stack tests (tests/conftest.py, issue #34): a test names the components
it uses; with any of them missing it is skipped with one line naming it and `make
testbed-deps`, and under CI it fails instead; with all there it runs.

Each component is hidden in turn as a user's machine would lack it: a binary by a PATH without
it (and the testbed's look-ups beyond PATH, /usr/sbin and PostgreSQL's directory, pointed at
copies without it), a Python module by an import made to fail, a Ruby library by a `require`
made to fail. Then every test that names it, as collected from the suite, is skipped with the
reason, and none errors; the others of a file still run (the synthetic file below)."""

from __future__ import annotations

import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from conftest import COMPONENTS, ROOT, TESTBED_COMPONENTS, run_process

TESTS = ROOT / "tests"

#: What hides each component: executables (from PATH and the testbed's other directories),
#: Python modules, Ruby features.
BINARIES = {"haproxy": ["haproxy"], "nginx": ["nginx"], "postgres": ["postgres", "initdb"], "ruby": ["ruby"],
            "puma": ["puma"], "unicorn": ["unicorn"], "chromium": ["chromium", "chromium-browser"]}
MODULES = {"gunicorn", "gevent", "psycopg", "playwright", "distributed", "starlette", "uvicorn"}
RUBY_FEATURES = {"ruby-pg": "pg", "ruby-rack": "rack", "ruby-rack-timeout": "rack-timeout"}

#: Loaded into the pytest run (-p): makes the hidden modules' imports fail, points the
#: testbed's look-ups beyond PATH at the copies, and lists what was collected (--dump).
PLUGIN = '''
import json, os, sys
for name in filter(None, os.environ.get("HIDE_MODULES", "").split(",")):
    sys.modules[name] = None  # `import name` raises ImportError; find_spec finds nothing
from dynosim.testbed import tools
tools.SBIN_DIRS = tuple(filter(None, os.environ.get("HIDE_SBIN", "").split(":")))
tools.POSTGRES_BINDIRS = os.environ.get("HIDE_POSTGRES", tools.POSTGRES_BINDIRS)

def pytest_collection_modifyitems(config, items):
    dump = os.environ.get("DUMP_NEEDS")
    if dump:
        with open(dump, "w") as f:
            json.dump({i.nodeid: [n for m in i.iter_markers("needs") for n in m.args] for i in items}, f)
'''

#: Ruby, loaded first (RUBYOPT=-r): a require of a hidden feature raises LoadError.
RUBY_HIDE = '''
module Kernel
  alias_method :dynosim_require, :require
  def require(name)
    raise LoadError, "cannot load such file -- #{name} (hidden)" if ENV["HIDE_RUBY"].to_s.split(",").include?(name)
    dynosim_require(name)
  end
end
'''

SYNTHETIC = '''
import pytest

@pytest.mark.needs({name!r})
def test_needing_it():
    pass

@pytest.mark.needs({other!r})
def test_needing_another():
    pass
'''


def copy_without(source_dirs: List[str], target: Path, hidden: List[str]) -> None:
    """`target` holds a link to every entry of `source_dirs` (the first of each name) but the
    hidden names."""
    target.mkdir(parents=True)
    for d in source_dirs:
        if not os.path.isdir(d):
            continue
        for entry in os.scandir(d):
            link = target / entry.name
            if entry.name not in hidden and not os.path.lexists(link):
                link.symlink_to(entry.path)


def hiding(name: str, tmp: Path) -> Dict[str, str]:
    """The environment of a pytest run on a machine without `name` (nothing hidden for "")."""
    from dynosim.testbed import tools

    tmp.mkdir()
    (tmp / "hide_components.py").write_text(PLUGIN)
    (tmp / "hide.rb").write_text(RUBY_HIDE)
    hidden = BINARIES.get(name, [])
    copy_without(os.environ.get("PATH", "").split(os.pathsep), tmp / "bin", hidden)
    copy_without(list(tools.SBIN_DIRS), tmp / "sbin", hidden)
    for bindir in sorted(Path("/").glob(tools.POSTGRES_BINDIRS.lstrip("/"))):
        copy_without([str(bindir)], tmp / "postgresql" / bindir.parent.name / "bin", hidden)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env.update(PATH=str(tmp / "bin"), HIDE_SBIN=str(tmp / "sbin"), HIDE_POSTGRES=str(tmp / "postgresql" / "*" / "bin"),
               HIDE_MODULES=name if name in MODULES else "",
               HIDE_RUBY=RUBY_FEATURES.get(name, ""), RUBYOPT=f"-r{tmp / 'hide.rb'}",
               PYTHONPATH=os.pathsep.join([str(tmp), str(TESTS)]))
    return env


def pytest_run(args: List[str], env: Dict[str, str], tmp: Path) -> Tuple[Dict[str, Tuple[str, str]], str]:
    """Runs pytest on `args`; each test's (outcome, message) by node id, from its JUnit XML."""
    report = tmp / "report.xml"
    result = run_process([sys.executable, "-m", "pytest", "-p", "hide_components", "-p", "no:cacheprovider",
                          "-q", "-rs", "--rootdir", str(ROOT), f"--junitxml={report}", *args],
                         text=True, env=env, cwd=ROOT, timeout=600)
    outcomes: Dict[str, Tuple[str, str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for kind in ("skipped", "failure", "error"):
            found = case.find(kind)
            if found is not None:
                # A module skipped at its import has the reason in the text ("collection skipped").
                text = found.get("message", "")
                if text == "collection skipped":
                    text = re.sub(r"^.*?:\d+: ", "", (found.text or "").strip())
                outcome, message = kind, text
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = (outcome, message)
    return outcomes, result.stdout + result.stderr


@pytest.fixture(scope="module")
def declared(tmp_path_factory) -> Dict[str, List[str]]:
    """Every test of the suite that names components, with the components."""
    tmp = tmp_path_factory.mktemp("collect")
    env = hiding("", tmp / "env")
    env["DUMP_NEEDS"] = str(tmp / "needs.json")
    result = run_process([sys.executable, "-m", "pytest", "-p", "hide_components", "-p", "no:cacheprovider",
                          "--collect-only", "-q", "--rootdir", str(ROOT), str(TESTS)],
                         text=True, env=env, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return {k: v for k, v in json.loads((tmp / "needs.json").read_text()).items() if v}


def module_level(name: str) -> List[str]:
    """The test files that require `name` before they can be imported at all."""
    found = []
    for path in sorted(TESTS.glob("test_*.py")):
        for args in re.findall(r"^require\(([^)]*)\)", path.read_text(encoding="utf-8"), re.M):
            if f'"{name}"' in args:
                found.append(str(path.relative_to(ROOT)))
    return found


def test_every_component_is_hideable_and_named_by_some_test(declared):
    named = {n for needs in declared.values() for n in needs}
    named |= {n for n in COMPONENTS if module_level(n)}
    # The testbed's are all of `dynosim testbed --check` (gevent's worker class has no real
    # run of its own); every other one is there because a test names it.
    assert named <= set(COMPONENTS) and set(COMPONENTS) - named <= set(TESTBED_COMPONENTS), named
    assert set(BINARIES) | MODULES | set(RUBY_FEATURES) == set(COMPONENTS)
    assert set(TESTBED_COMPONENTS) <= set(COMPONENTS)
    # The bug of issue #34: a Puma dyno with a database pool needs the testbed's psycopg too.
    puma_db = next(k for k in declared if "puma_dyno_answers_with_the_protocol_through_a_database_pool" in k)
    assert "psycopg" in declared[puma_db]


def other_than(name: str) -> str:
    """A component `make install` has, other than `name`."""
    return "starlette" if name != "starlette" else "uvicorn"


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_without_a_component_its_tests_skip_with_the_reason_and_none_errors(name, declared, tmp_path):
    """Every test of the suite that names it (or whose file requires it), and a synthetic one
    beside a test naming another component, which runs."""
    env = hiding(name, tmp_path / "env")
    (tmp_path / "test_synthetic.py").write_text(SYNTHETIC.format(name=name, other=other_than(name)))
    affected = sorted(nodeid for nodeid, needs in declared.items() if name in needs)
    outcomes, output = pytest_run(["-p", "conftest", str(tmp_path / "test_synthetic.py"), *affected,
                                   *module_level(name)], env, tmp_path)
    ran = [test for test in outcomes if test.endswith("::test_needing_another")]
    assert len(ran) == 1 and outcomes.pop(ran[0])[0] == "passed", output[-3000:]
    assert len(outcomes) >= 1 + len(affected), output[-3000:]
    for test, (outcome, message) in outcomes.items():
        assert outcome == "skipped", (test, outcome, message, output[-3000:])
        assert name in message and "make testbed-deps" in message and "\n" not in message, (test, message)


@pytest.mark.parametrize("name", ["haproxy", "psycopg", "ruby-pg", "chromium"])
def test_under_ci_a_missing_component_fails_its_tests_and_the_others_run(name, tmp_path):
    (tmp_path / "test_synthetic.py").write_text(SYNTHETIC.format(name=name, other=other_than(name)))
    env = hiding(name, tmp_path / "env")
    env["CI"] = "true"
    outcomes, output = pytest_run(["-p", "conftest", str(tmp_path / "test_synthetic.py")], env, tmp_path)
    by_name = {test.split("::")[-1]: got for test, got in outcomes.items()}
    outcome, message = by_name["test_needing_it"]
    # Failed in its setup, before any fixture could start the real stack: an error, which
    # fails the run as a failure does.
    assert outcome == "error", output
    assert "CI runs every real-stack test" in message and name in message and "make testbed-deps" in message
    assert by_name["test_needing_another"][0] == "passed", output
    del env["CI"]
    outcomes, output = pytest_run(["-p", "conftest", str(tmp_path / "test_synthetic.py")], env, tmp_path)
    by_name = {test.split("::")[-1]: got for test, got in outcomes.items()}
    assert by_name["test_needing_it"][0] == "skipped", output
    assert by_name["test_needing_another"][0] == "passed", output


def test_with_every_component_there_nothing_is_skipped_for_want_of_one(tmp_path):
    """On a machine with all of them (CI's, after `make testbed-deps`), nothing hidden: a test
    naming every component runs. Elsewhere it is skipped, naming what is missing."""
    (tmp_path / "test_all.py").write_text(
        f"import pytest\n\n@pytest.mark.needs(*{sorted(COMPONENTS)!r})\ndef test_all():\n    pass\n")
    env = hiding("", tmp_path / "env")
    outcomes, output = pytest_run(["-p", "conftest", str(tmp_path / "test_all.py")], env, tmp_path)
    ((outcome, message),) = outcomes.values()
    absent = [n for n in sorted(COMPONENTS) if COMPONENTS[n]() is None]
    if absent:
        assert outcome == "skipped" and all(n in message for n in absent), (outcome, message)
    else:
        assert outcome == "passed", output


def test_a_name_no_component_has_is_refused_at_collection(tmp_path):
    (tmp_path / "test_typo.py").write_text("import pytest\n\n@pytest.mark.needs('haproxi')\ndef test_x():\n    pass\n")
    env = hiding("", tmp_path / "env")
    result = run_process([sys.executable, "-m", "pytest", "-p", "hide_components", "-p", "conftest", "-q",
                          "--rootdir", str(ROOT), str(tmp_path / "test_typo.py")], text=True, env=env, cwd=ROOT,
                         timeout=120)
    assert result.returncode != 0 and "haproxi" in result.stdout + result.stderr
