#!/usr/bin/env bash
# Vendors uPlot (MIT, Leon Sorokin) into python/dynosim/web/ from its npm package, checked
# against the SHA-256 recorded here: the HTML report inlines it and the playground serves it,
# so neither `pip install .` nor CI ever needs npm. Run it to refresh the copy after changing
# VERSION and SHA256; commit what it writes.
set -euo pipefail
VERSION=1.6.32
SHA256=4b8a8191e425658e3ea8c8c1314b0fc679c861ee3a1af2b20c7b16ba50b5133d
here="$(cd "$(dirname "$0")/.." && pwd)"
out="$here/python/dynosim/web"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "uplot@$VERSION" >/dev/null)
tarball="$tmp/uplot-$VERSION.tgz"
echo "$SHA256  $tarball" | sha256sum --check --quiet
tar -xzf "$tarball" -C "$tmp"
cp "$tmp/package/dist/uPlot.iife.min.js" "$out/uPlot.iife.min.js"
cp "$tmp/package/dist/uPlot.min.css" "$out/uPlot.min.css"
cp "$tmp/package/LICENSE" "$out/uPlot.LICENSE"
echo "vendored uPlot $VERSION into $out"
