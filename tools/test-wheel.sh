#!/usr/bin/env bash
# The wheel `make wheel` built, as a user without Rust gets it: installed into a fresh venv
# (its dependencies from the package index) by a shell whose PATH has no cargo or rustc, then
# `dynosim --version` and a one-minute run of the built-in rapgenius scenario from it.
# Usage: tools/test-wheel.sh [WHEEL_DIR]   (default dist)
set -euo pipefail
dir="${1:-dist}"
shopt -s nullglob
wheels=("$dir"/dynosim-*-abi3-manylinux*.whl)
if [ ${#wheels[@]} -ne 1 ]; then
  echo "test-wheel: expected one abi3 manylinux wheel in $dir, found ${#wheels[@]}" >&2
  exit 1
fi
wheel="$(cd "$(dirname "${wheels[0]}")" && pwd)/$(basename "${wheels[0]}")"
home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
python3 -m venv "$home/venv"
# Only the system's directories and the new venv on PATH: no ~/.cargo/bin, no checkout's .venv;
# and run from an empty directory, so that nothing imports from the checkout.
env -i HOME="$home" PATH="$home/venv/bin:/usr/local/bin:/usr/bin:/bin" LANG=C.UTF-8 WHEEL="$wheel" \
  bash -euo pipefail -c '
  if command -v cargo >/dev/null || command -v rustc >/dev/null; then
    echo "test-wheel: Rust is on PATH" >&2; exit 1
  fi
  cd "$HOME"
  pip install -q "$WHEEL"
  dynosim --version
  python -c "import dynosim; assert dynosim.__file__.startswith(\"$HOME/venv/\"), dynosim.__file__"
  dynosim run rapgenius --duration 1min
  dynosim run rapgenius --duration 1min --json \
    | python -c "import json, sys; r = json.load(sys.stdin)[\"results\"][0]; assert r[\"duration\"] == 60, r[\"duration\"]"
'
echo "test-wheel: $(basename "$wheel") installs and runs without Rust"
