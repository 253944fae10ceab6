import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = ROOT / "python" / "dynosim" / "scenarios"


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Runs the installed CLI as a user would, in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "dynosim", *args],
        capture_output=True, text=True, cwd=cwd, timeout=300,
    )


def assert_one_line_error(result, *fragments, code=2):
    """A user mistake: one line on stderr naming what is wrong, the exit code, nothing on
    stdout, no traceback."""
    assert result.returncode == code, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("dynosim: error: ")
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def rapgenius_text() -> str:
    return (BUILTIN / "rapgenius.toml").read_text()
