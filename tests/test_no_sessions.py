"""The repository speaks of the product, not of how it was made (issue #34, "The docs speak of
the product"): no comment, docstring, script or page names a development session (by its
number, or as "this" one); a figure's history carries a date and a commit, in CHANGELOG.md.
Reads files only."""

import re
from pathlib import Path
from typing import Iterator

from conftest import ROOT

#: Names of a development session: a numbered one, or one pointed at. A Unix session ("a
#: session of its own", "other sessions") names neither.
PATTERNS = [re.compile(r"\bsessions?[\s-]*\d", re.IGNORECASE),
            re.compile(r"\b(?:this|that|another|earlier|later|previous|next) session\b", re.IGNORECASE)]

#: Folders not read: build outputs, environments, the version control's own.
SKIPPED_DIRS = {".git", "target", ".venv", "node_modules", "__pycache__", ".pytest_cache", "dist", "build", "out"}

#: Text files by suffix (and the suffixless Makefile); vendored minified scripts are not ours.
SUFFIXES = {".py", ".rs", ".md", ".toml", ".sh", ".js", ".html", ".css", ".json", ".yml", ".yaml", ".txt",
            ".ru", ".rb", ".cfg", ".ini"}


def checked_files() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*")):
        rel = path.relative_to(ROOT)
        if any(part in SKIPPED_DIRS for part in rel.parts[:-1]) or not path.is_file():
            continue
        if ".min." in path.name:
            continue
        if path.suffix in SUFFIXES or path.name == "Makefile" or rel.parts[0] == ".ci":
            yield path


def test_no_file_names_a_development_session():
    files = list(checked_files())
    # The walk reaches what it is meant to (a test that reads nothing passes anything).
    names = {p.relative_to(ROOT).as_posix() for p in files}
    for expected in ("README.md", "CHANGELOG.md", "docs/benchmarks.md", "docs/README.md", "docs/feedback.md", "Makefile", "bench/large_fleet.py",
                     "python/dynosim/cli/run.py", "crates/dynosim-engine/src/lib.rs", "tests/conftest.py"):
        assert expected in names, f"{expected} is not read"
    found = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if any(p.search(line) for p in PATTERNS):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, "name a development session (say the date and commit instead):\n" + "\n".join(found)


def test_the_patterns_catch_a_session_and_spare_a_unix_one():
    # Put together here, so that this file does not hold what it looks for.
    word = "session"
    caught = [f"measured in {word} 3", f"{word.title()}s 1-10 ran on a Xeon", f"({word}-11, 2026-11-24)",
              f"this {word}'s changes", f"as an earlier {word} found"]
    spared = ["starts it in a session of its own", "other sessions to end", "requests.Session()",
              "POST /api/v1/sessions", "the session leader"]
    for text in caught:
        assert any(p.search(text) for p in PATTERNS), text
    for text in spared:
        assert not any(p.search(text) for p in PATTERNS), text
