"""A fix that says which data file to edit names the user's project directory, never the install tree (issue 39
item 4: fixes pointed into site-packages). Pure: the wheel's layout is given by pointing numaforge.paths' BUILTIN
at a directory shaped like numaforge/_data (the one boundary faked here: no wheel is installed in this process;
tests/install/test_installed.py runs the real wheel)."""

from __future__ import annotations

import shutil

import pytest

from numaforge import paths
from numaforge.bios.errors import VendorMapError
from numaforge.bios.registry import Registry
from numaforge.bios.vendors import load_vendor_map, translate
from numaforge.lab.bmc import load_flavour


@pytest.fixture
def wheel_layout(tmp_path, monkeypatch):
    data = tmp_path / "site-packages" / "numaforge" / "_data"
    shutil.copytree(paths.BUILTIN / "bios", data / "bios")
    project = tmp_path / "proj"
    project.mkdir()
    monkeypatch.setattr(paths, "BUILTIN", data)
    monkeypatch.setattr(paths, "CHECKOUT", None)
    paths.set_project_dir(project)
    try:
        yield data, project
    finally:
        paths.set_project_dir(None)


def test_editable_names_the_project_copy_of_a_builtin_file(wheel_layout):
    data, project = wheel_layout
    shown = paths.editable(data / "bios" / "vendors" / "dell.yaml")
    assert shown.startswith(str(project / "bios" / "vendors" / "dell.yaml")) and "site-packages" not in shown
    own = project / "bios" / "vendors" / "dell.yaml"
    assert paths.editable(own) == str(own)


def test_a_vendor_map_fix_names_the_project_not_the_install_tree(wheel_layout):
    data, project = wheel_layout
    vmap = load_vendor_map("dell")
    assert str(vmap.path).startswith(str(data))
    generic = load_flavour("generic")  # a registry no Dell generation fits
    with pytest.raises(VendorMapError) as e:
        translate(
            {"numa_nodes_per_socket": 4}, {}, vmap, Registry.from_json(generic.registry), system_model=generic.model
        )
    fix = e.value.fix or ""
    assert str(project / "bios" / "vendors" / "dell.yaml") in fix and "site-packages" not in fix, fix
