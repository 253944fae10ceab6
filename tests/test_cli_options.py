"""The options the verbs share, read from each verb's --help as a user reads them: a verb that
prints a document has --json (issue 23: `sweep` had none), a verb that runs a scenario takes
it with --set, --seed, --replications and --duration, and a verb that reads router logs has
the log options. A new verb must say here which of these it is."""

import argparse
import re
from typing import Dict, List, Set, Tuple

import pytest

from dynosim import cli
from dynosim.cli.entry import build_parser

#: A scenario (positional, default rapgenius) and the options that change it (cli.common's
#: add_scenario_arguments).
SCENARIO = ["scenario", "--set", "--seed", "--replications", "--duration"]
#: What every command reading router logs takes (cli.common's add_log_arguments).
LOGS = ["FILE", "--format", "--log-format", "--host"]

#: Each verb (its words), and what its --help must offer.
VERBS: Dict[Tuple[str, ...], List[str]] = {
    # The analysis verbs: they run a scenario and print their document with --json.
    # Those the HTML report covers (issue #27) take --html too; those that run many points
    # run them on a Dask cluster with --dask (issue #28).
    ("run",): SCENARIO + ["--json", "--html"],
    ("compare",): SCENARIO + ["--json", "--html"],
    ("capacity",): SCENARIO + ["--json", "--html", "--dask"],
    ("sweep",): SCENARIO + ["--json", "--html", "--dask"],
    ("stability",): SCENARIO + ["--json", "--html", "--dask", "--plot"],
    ("tune",): SCENARIO + ["--json", "--html", "--dask"],
    ("ramp",): SCENARIO + ["--json", "--html", "--dask"],
    ("demo",): SCENARIO + ["--json"],
    ("testbed",): SCENARIO + ["--json"],
    # Their output is a picture (a GIF or a page), not a document: no --json.
    ("animate",): SCENARIO,
    # The verbs that read router logs print their document with --json too.
    ("logs", "summary"): LOGS + ["--json", "--html"],
    ("logs", "fit"): LOGS + ["--json"],
    ("logs", "replay"): LOGS + ["--json"],
    ("testbed", "replay"): LOGS + ["--json"],
    # The playground: a server, its page the output.
    ("serve",): ["SCENARIO", "--port", "--host", "--data", "--max-runs", "--max-memory", "--max-queue"],
    # Listings and a file: a text for people, nothing to compute.
    ("scenarios",): [],
    ("init",): [],
    ("keys",): [],
}


def offered(help_text: str) -> Set[str]:
    """The option strings and positional names a --help defines (its argument sections, not
    its usage line)."""
    names: Set[str] = set()
    section = None
    for line in help_text.splitlines():
        if line and not line[0].isspace():
            section = line if line.endswith(":") else None  # "options:", "positional arguments:"
            continue
        if section is None or not re.match(r"  \S", line):
            continue  # a wrapped help text or a line outside the argument sections
        invocation = re.split(r"\s{2,}", line.strip())[0]  # "-h, --help", "--set KEY.PATH=VALUE", "scenario"
        if invocation.startswith("-"):
            names.update(re.findall(r"(?<![\w-])--?\w[\w-]*", invocation))
        else:
            names.add(invocation)
    return names


def leaf_verbs() -> Set[Tuple[str, ...]]:
    """Every verb of `dynosim --help`, a verb with verbs of its own (logs) by those; `testbed
    replay` is parsed by the testbed's parser (cli.testbed) and added by hand."""
    def walk(parser: argparse.ArgumentParser, words: Tuple[str, ...]) -> Set[Tuple[str, ...]]:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            return {words}
        return {leaf for a in subs for name, sub in a.choices.items() for leaf in walk(sub, words + (name,))}

    return walk(build_parser(), ()) | {("testbed", "replay")}


def test_every_verb_is_listed_here():
    assert leaf_verbs() == set(VERBS)


@pytest.mark.parametrize("words, required", list(VERBS.items()), ids=[" ".join(w) for w in VERBS])
def test_each_verb_offers_the_shared_options(words, required, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # argparse's width: one line per option
    with pytest.raises(SystemExit) as e:
        cli.main([*words, "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    names = offered(text)
    assert "--help" in names, text  # the parse found the options at all
    missing = [name for name in required if name not in names]
    assert not missing, f"dynosim {' '.join(words)} --help lacks {missing}:\n{text}"


#: A bad argument for each of the argument types in cli.common that a verb's own option uses,
#: and the words of its one-line error.
BAD_ARGUMENTS = [
    (["serve", "--port", "70000"], "--port: expected a port from 0 to 65535, got 70000"),
    (["serve", "--port", "http"], "--port: expected a port number, got 'http'"),
    (["animate", "--out", "x.gif", "--fps", "0"], "--fps: must be a positive number, got '0'"),
    (["animate", "--out", "x.gif", "--seconds", "soon"], "--seconds: expected a number, got 'soon'"),
    (["testbed", "replay", "x.log", "--keep", "1.5"], "--keep: expected a share from 0 to 1, got '1.5'"),
    (["testbed", "replay", "x.log", "--alloc", "lots"], "--alloc: expected a size such as 256KiB or 1MiB"),
    (["testbed", "replay", "x.log", "--sample-every", "0s"], "--sample-every: expected a duration such as 250ms"),
    (["run", "--seed", "-1"], "--seed: must be from 0 to 2^64-1, got -1"),
]


@pytest.mark.parametrize("words, message", BAD_ARGUMENTS, ids=[" ".join(w) for w, _ in BAD_ARGUMENTS])
def test_a_bad_argument_is_one_line_from_the_shared_checks(words, message, capsys):
    assert cli.main(words) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynosim: error: argument "), captured.err
    assert message in lines[0], lines[0]


def test_no_verb_checks_its_own_numbers():
    """The argument types that parse a number, a size or a duration are cli.common's; a verb
    module keeps only checks of its own (names of policies, metrics, lists)."""
    import inspect

    from dynosim.cli import common, entry

    shared = {name for name, f in vars(common).items() if inspect.isfunction(f)}
    checked = 0
    for module in {m for m in vars(entry).values() if inspect.ismodule(m) and m.__name__.startswith("dynosim.cli.")}:
        if module is common:
            continue
        checked += 1
        for name, f in vars(module).items():
            if inspect.isfunction(f) and f.__module__ == module.__name__ and name not in shared:
                body = inspect.getsource(f)
                parses = re.search(r"\b(int|float)\(text\)", body) or "parse_duration(text)" in body
                assert not (parses and "ArgumentTypeError" in body), \
                    f"{module.__name__}.{name} checks a number itself: use (or add) a type in cli.common"
    assert checked >= 10, checked  # the verbs' modules were found and read
