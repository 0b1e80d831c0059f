"""The lab_vm tier's xdist groups as scripts/test.sh schedules them (-n 2 --dist loadgroup), read from a real
collection of the tier (pytest --collect-only -m lab_vm in a child, nothing booted): every test on a shared VM is
in that VM's group, and the longest group (tests/labvm.py's LONG_GROUP) is handed out first to the second worker
and keeps it to itself (docs/BENCHMARKS.md, "The lab_vm tier")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest
from labvm import LONG_GROUP, NIC_GROUP, SESSION_GROUP

from numaforge.paths import ROOT

# Loaded into the child pytest (and its xdist workers): records every selected test, after every other
# collection hook (trylast: xdist's suffix included), then deselects them all, so nothing runs and nothing boots.
PLUGIN = """
import json, os
import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    rows = []
    for it in items:
        if not it.get_closest_marker("lab_vm"):
            continue
        m = it.get_closest_marker("xdist_group")
        rows.append({"id": it.nodeid, "group": m.args[0] if m else None, "fixtures": list(it.fixturenames),
                     "first": bool(getattr(it.module, "SESSION_FIRST", False))})
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(os.environ["LAB_GROUPS_OUT"], name + ".json"), "w") as fh:
        json.dump(rows, fh)
    config.hook.pytest_deselected(items=list(items))
    items[:] = []
"""


def collect(tmp_path, *xdist: str) -> list[dict]:
    """The lab_vm tier's tests as a pytest run with these extra arguments sees them (a worker's view with -n)."""
    (tmp_path / "lab_groups_plugin.py").write_text(PLUGIN)
    out = tmp_path / "out"
    out.mkdir()
    env = {
        **os.environ,
        "LAB_GROUPS_OUT": str(out),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "lab_groups_plugin", "-q", "-m", "lab_vm"]
        + list(xdist),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 5, r.stdout[-2000:] + r.stderr[-2000:]  # 5: every test deselected, none ran
    views = sorted(out.glob("*.json"))
    assert views, r.stdout[-2000:]
    return json.loads(views[0].read_text())


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> list[dict]:
    """One collection for both tests (it takes ~20 s): what a loadgroup worker (scripts/test.sh's flags) sees."""
    return collect(tmp_path_factory.mktemp("groups"), "-n", "1", "--dist", "loadgroup")


def test_an_xdist_worker_schedules_by_the_groups_conftest_gives(rows):
    """Each lab_vm test's node id carries its group as the "@group" suffix that --dist loadgroup splits work
    units by (tests/conftest.py's grouping runs before xdist's hook, and writes it where pytest 9.2 reads it)."""
    assert rows
    wrong = [(r["id"], r["group"]) for r in rows if not r["group"] or not r["id"].endswith("@" + r["group"])]
    assert wrong == [], wrong


def test_shared_vm_tests_are_in_their_vms_group_and_the_longest_group_goes_first_alone(rows):
    assert rows and all(r["group"] for r in rows), [r["id"] for r in rows if not r["group"]]
    for r in rows:  # one boot per shared VM: every test that uses it runs on the same worker
        if "lab" in r["fixtures"]:
            assert r["group"] == SESSION_GROUP, r
        elif "nic_lab" in r["fixtures"]:
            assert r["group"] == NIC_GROUP, r
    assert "nic_lab" not in {f for r in rows if r["group"] == SESSION_GROUP for f in r["fixtures"]}

    # loadgroup hands groups out largest first and gives a worker its next group when <= 2 of its tests are
    # pending: the longest group must be the largest after the session's and hold more than 2 tests
    sizes = Counter(r["group"] for r in rows)
    others = [n for g, n in sizes.items() if g not in (SESSION_GROUP, LONG_GROUP)]
    assert sizes[LONG_GROUP] > 2 and sizes[LONG_GROUP] > max(others), sizes
    assert sizes[SESSION_GROUP] > sizes[LONG_GROUP], sizes
    long = [r["id"] for r in rows if r["group"] == LONG_GROUP]
    n_probe = sum("test_probe_direction_vm.py" in i for i in long)
    assert n_probe >= 1 and all("test_probe_direction_vm.py" in i for i in long[:n_probe]), long

    # each group's tests are adjacent in collection order: a run without xdist boots each shared VM once as well,
    # and tests/conftest.py stops a shared VM after the last test of its group
    runs = [g for i, g in enumerate(r["group"] for r in rows) if i == 0 or rows[i - 1]["group"] != g]
    assert len(runs) == len(set(runs)), runs

    session = [r for r in rows if r["group"] == SESSION_GROUP]
    firsts = [r["first"] for r in session]
    assert firsts == sorted(firsts, reverse=True) and any(firsts)  # the SESSION_FIRST module leads
    assert "sig_enforce" in session[-1]["id"]  # the one-way switch runs last on the session VM
