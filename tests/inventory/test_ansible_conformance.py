"""Conformance with Ansible: for every inventory under tests/data/ansible/, numaforge's hosts, groups, resolved
variables and --limit selections equal what Ansible computes.

Ansible is the reference implementation and runs here (scripts/setup.d/60-bench.sh installs it into .venv):
tests/inventory/ansible_oracle.py makes the library calls `ansible-inventory --list` makes, for all cases in one
process; one test checks that oracle against the real `ansible-inventory` command.
Each case directory holds one inventory file (any name), optional group_vars/ and host_vars/, and `limits`
(one --limit pattern a line; {dir} stands for the case directory).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from numaforge.inventory import ansible
from numaforge.inventory.loader import load_inventory
from numaforge.inventory.patterns import limit_hosts

DATA = Path(__file__).parents[1] / "data" / "ansible"
ORACLE = Path(__file__).with_name("ansible_oracle.py")
CASES = sorted(p for p in DATA.iterdir() if p.is_dir())


def inventory_file(case: Path) -> Path:
    files = [p for p in case.iterdir() if p.is_file() and p.name not in ("limits", "limit-file")]
    assert len(files) == 1, f"{case.name}: exactly one inventory file expected, found {files}"
    return files[0]


def limits(case: Path) -> list[str]:
    p = case / "limits"
    lines = p.read_text().splitlines() if p.exists() else []
    return [line.replace("{dir}", str(case)) for line in lines if line.strip()]


def plain(value):
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def ansible_env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        HOME=str(tmp), ANSIBLE_LOCAL_TEMP=str(tmp / "tmp"), ANSIBLE_CONFIG=str(tmp / "none.cfg"), ANSIBLE_NOCOLOR="1"
    )
    return env


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("oracle")
    spec = [{"name": c.name, "path": str(inventory_file(c)), "limits": limits(c)} for c in CASES]
    (tmp / "cases.json").write_text(json.dumps(spec))
    r = subprocess.run(
        [sys.executable, str(ORACLE), str(tmp / "cases.json")],
        cwd=tmp,
        env=ansible_env(tmp),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def test_corpus_is_large_and_varied():
    assert len(CASES) >= 20
    names = [inventory_file(c).name for c in CASES]
    assert any(n.endswith(".ini") for n in names) and any("." not in n for n in names)
    assert sum((c / "group_vars").is_dir() or (c / "host_vars").is_dir() for c in CASES) >= 4
    assert any(p.is_dir() for c in CASES for p in (c / "group_vars").glob("*")), "a group_vars directory"
    assert any(p.is_dir() for c in CASES for p in (c / "host_vars").glob("*")), "a host_vars directory"
    assert sum(len(limits(c)) for c in CASES) >= 40


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hosts_groups_and_vars_match_ansible(case, oracle):
    expected = oracle[case.name]
    assert "error" not in expected, f"Ansible refused {case.name}: {expected.get('error')}"
    inv = ansible.read(inventory_file(case))
    assert sorted(inv.hosts) == sorted(expected["hostvars"])
    for host, want in expected["hostvars"].items():
        got, where = inv.resolve(host)
        assert plain(got) == want, f"{case.name}: variables of {host}"
        assert all(where[k] for k in got), f"{case.name}: every variable of {host} knows where it was set"
    assert sorted(inv.groups) == sorted(expected["groups"])
    for name, want in expected["groups"].items():
        g = inv.groups[name]
        assert (sorted(g.hosts), sorted(g.children)) == (want["hosts"], want["children"]), f"{case.name}: {name}"


@pytest.mark.parametrize("case", [c for c in CASES if limits(c)], ids=[c.name for c in CASES if limits(c)])
def test_limit_patterns_match_ansible(case, oracle):
    expected = oracle[case.name]["limits"]
    model = load_inventory(inventory_file(case))
    groups = model.pattern_groups()
    for pattern in limits(case):
        got = limit_hosts(list(model.hosts), groups, pattern, strict=False)
        assert sorted(got) == expected[pattern], f"{case.name}: --limit {pattern!r}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_numaforge_model_reads_the_resolved_ansible_vars(case, oracle):
    """The SSH side numaforge uses is the one Ansible would use: ansible_host (else the name), port, user."""
    model = load_inventory(inventory_file(case))
    for name, hv in oracle[case.name]["hostvars"].items():
        host = model.hosts[name]
        if hv.get("ansible_connection", "ssh") not in ("ssh", "smart", "paramiko"):
            assert host.ssh is None and host.connection == hv["ansible_connection"]
            continue
        assert host.ssh.address == str(hv.get("ansible_host", name)), f"{case.name}: {name}"
        assert host.ssh.port == int(hv.get("ansible_port", 22))
        assert host.ssh.user == hv.get("ansible_user", "root")
        assert host.ssh.key_file == (None if "ansible_ssh_private_key_file" not in hv else host.ssh.key_file) and (
            host.ssh.key_file is None
        ) == ("ansible_ssh_private_key_file" not in hv)
        assert {k: v for k, v in hv.items() if not k.startswith(("ansible_", "numaforge_"))} == {
            k: v for k, v in plain(host.vars).items() if not k.startswith("ansible_")
        }


def test_oracle_matches_the_ansible_inventory_command(oracle, tmp_path):
    """The oracle is what `ansible-inventory --list` prints (checked on two cases: YAML with group_vars, INI)."""
    cmd = shutil.which("ansible-inventory", path=str(Path(sys.executable).parent))
    assert cmd, "ansible-inventory missing: run scripts/setup.sh (60-bench.sh installs Ansible)"
    for name in ("10-group-vars-files", "13-ini-basic"):
        case = DATA / name
        r = subprocess.run(
            [cmd, "-i", str(inventory_file(case)), "--list"],
            cwd=tmp_path,
            env=ansible_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        listed = json.loads(r.stdout)
        assert listed["_meta"]["hostvars"] == oracle[name]["hostvars"]
        pat = limits(case)[0]
        r = subprocess.run(
            [cmd, "-i", str(inventory_file(case)), "--list", "--limit", pat],
            cwd=tmp_path,
            env=ansible_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert sorted(json.loads(r.stdout)["_meta"]["hostvars"]) == oracle[name]["limits"][pat]
