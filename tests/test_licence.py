"""dynosim is MIT OR Apache-2.0 (issue #23): both texts at the root, the expression in every
crate's manifest and in the Python package's metadata, and the README says so. Reads files
only; the engine need not be built (the installed package's metadata is checked when there is
one)."""

import hashlib
import re
import sys
from importlib import metadata

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from conftest import ROOT

EXPRESSION = "MIT OR Apache-2.0"
FILES = ["LICENSE-MIT", "LICENSE-APACHE"]


def sha256(name: str) -> str:
    return hashlib.sha256((ROOT / name).read_bytes()).hexdigest()


def toml(path):
    return tomllib.loads(path.read_text(encoding="utf-8"))


def test_the_mit_text_is_the_standard_one_with_our_copyright():
    text = (ROOT / "LICENSE-MIT").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n\nCopyright (c) 2026 The dynosim developers\n\n")
    assert "Permission is hereby granted, free of charge, to any person obtaining a copy" in text
    assert "The above copyright notice and this permission notice shall be included in all" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text
    # The whole file, word for word: a word lost or changed in an edit changes the licence.
    assert sha256("LICENSE-MIT") == "8b56594e946aa755a4b906c8cc41f2579bf22236d642593761b544bcf022533f"


def test_the_apache_text_is_the_whole_licence():
    text = (ROOT / "LICENSE-APACHE").read_text(encoding="utf-8")
    assert "Apache License\n" in text and "Version 2.0, January 2004" in text
    headings = re.findall(r"^   (\d)\. ([A-Z][\w ]+)\.", text, re.M)
    assert [int(n) for n, _ in headings] == list(range(1, 10)), headings
    assert [h for _, h in headings][-1] == "Accepting Warranty or Additional Liability"
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX: How to apply the Apache License" in text
    # apache.org's LICENSE-2.0.txt, byte for byte (its MD5 is 3b83ef96387f14655fc854ddc3c6bd57).
    assert sha256("LICENSE-APACHE") == "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_every_crate_declares_the_licence():
    workspace = toml(ROOT / "Cargo.toml")["workspace"]
    inherited = workspace.get("package", {}).get("license")
    manifests = sorted((ROOT / "crates").glob("*/Cargo.toml"))
    # Every member of the workspace is a crates/* folder, so the glob sees them all.
    assert sorted(f"crates/{m.parent.name}" for m in manifests) == sorted(workspace["members"])
    for manifest in manifests:
        package = toml(manifest)["package"]
        declared = inherited if package.get("license") == {"workspace": True} else package.get("license")
        assert declared == EXPRESSION, f"{manifest.relative_to(ROOT)}: license = {package.get('license')!r}"
        assert "license-file" not in package, manifest  # an SPDX expression, not a custom text


def test_the_python_package_declares_the_licence_and_ships_its_texts():
    pyproject = toml(ROOT / "pyproject.toml")
    project = pyproject["project"]
    assert project["license"] == EXPRESSION
    assert project["license-files"] == FILES
    assert all((ROOT / name).is_file() for name in project["license-files"])
    # PEP 639: a licence expression and licence classifiers do not go together.
    assert not [c for c in project.get("classifiers", []) if c.startswith("License ::")]
    # The backend must write the expression as License-Expression: maturin does from 1.9.2
    # (1.9.0 and 1.9.1 put it in the free-text License field).
    (maturin,) = [r for r in pyproject["build-system"]["requires"] if r.startswith("maturin")]
    floor = re.search(r">=\s*([\d.]+)", maturin)
    assert floor and tuple(map(int, floor.group(1).split("."))) >= (1, 9, 2), maturin


def test_the_installed_package_carries_the_licence():
    try:
        meta = metadata.metadata("dynosim")
    except metadata.PackageNotFoundError:
        pytest.skip("dynosim is not installed (make build-dev)")
    assert meta["License-Expression"] == EXPRESSION, "stale build? make build-dev"
    assert sorted(meta.get_all("License-File") or []) == sorted(FILES)


def test_the_readme_names_the_licence():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Licence\n", 1)
    assert len(section) == 2, "no Licence section in the README"
    assert "(LICENSE-MIT)" in section[1] and "(LICENSE-APACHE)" in section[1]
