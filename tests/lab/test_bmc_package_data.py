"""What the shipped BMC simulator reads lies inside the package and is declared package data (issue 39 item 4):
an installed wheel has no tests/ directory, so a corpus flavour reading tests/data failed from `pip install`.
Pure: files and pyproject.toml only; tests/install runs every flavour from a real wheel."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest
import yaml

from numaforge.lab.bmc import ALL_FLAVOURS, load_flavour
from numaforge.lab.bmc import flavours as flavours_mod
from numaforge.paths import CHECKOUT, PACKAGE_DIR


def _package_data() -> list[str]:
    assert CHECKOUT is not None
    cfg = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())
    return cfg["tool"]["setuptools"]["package-data"]["numaforge"]


def _files_of(name: str) -> list[Path]:
    spec = yaml.safe_load((flavours_mod.HERE / f"{name}.yaml").read_text())
    files = [flavours_mod.HERE / f"{name}.yaml"]
    if spec.get("base"):
        files.append(flavours_mod.HERE / f"{spec['base']}.yaml")
    if spec.get("registry_file"):
        files.append(flavours_mod.CORPUS_DIR / spec["registry_file"])
    return files


@pytest.mark.parametrize("name", ALL_FLAVOURS)
def test_every_file_a_flavour_reads_is_package_data(name):
    globs = _package_data()
    for f in _files_of(name):
        assert f.is_file(), f
        rel = f.resolve().relative_to(PACKAGE_DIR)  # ValueError: outside the package (e.g. tests/data)
        assert any(fnmatch.fnmatch(str(rel), g) for g in globs), f"{rel} matches no package-data glob {globs}"
    assert load_flavour(name).name == name
