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


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def rapgenius_text() -> str:
    return (BUILTIN / "rapgenius.toml").read_text()
