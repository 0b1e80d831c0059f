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

from numaforge.errors import InventoryError
from numaforge.inventory import ansible
from numaforge.inventory.context import Ctx
from numaforge.inventory.from_ansible import rendered_values
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
    for name, raw in oracle[case.name]["hostvars"].items():
        host = model.hosts[name]
        rendered = oracle[case.name]["rendered"][name]  # the values a play sees (templates rendered)
        hv = {**raw, **rendered}
        if hv.get("ansible_connection", "ssh") not in ("ssh", "smart", "paramiko"):
            assert host.ssh is None and host.connection == hv["ansible_connection"]
            continue
        assert host.ssh.address == str(hv.get("ansible_host", name)), f"{case.name}: {name}"
        assert host.ssh.port == int(hv.get("ansible_port", 22))
        assert host.ssh.user == hv.get("ansible_user", "root")
        assert host.ssh.key_file == (None if "ansible_ssh_private_key_file" not in hv else host.ssh.key_file) and (
            host.ssh.key_file is None
        ) == ("ansible_ssh_private_key_file" not in hv)
        assert {
            k: typeless(v, k in rendered) for k, v in hv.items() if not k.startswith(("ansible_", "numaforge_"))
        } == {k: typeless(v, k in rendered) for k, v in plain(host.vars).items() if not k.startswith("ansible_")}


def typeless(value, templated: bool = True):
    """A rendered value compared as text: ansible-core 2.18 renders `{{ 2200 + slot }}` to "2211", 2.19 (and
    numaforge) to 2211; the text is the same. Values that were not templates keep their types."""
    if not templated:
        return value
    if isinstance(value, dict):
        return {k: typeless(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typeless(v) for v in value]
    return str(value)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_templated_variables_render_as_ansible_renders_them(case, oracle):
    """Issue 39 item 10: every templated variable of every host (the list comes from Ansible's own reading of
    the data) renders in numaforge to what Ansible's Templar renders; one Ansible cannot render fails here too."""
    ainv = ansible.read(inventory_file(case))
    ctx = Ctx(str(inventory_file(case)), allow_plaintext=False)
    for host, want in oracle[case.name]["rendered"].items():
        for var, value in want.items():
            if isinstance(value, dict) and set(value) == {"error"}:
                with pytest.raises(InventoryError):
                    rendered_values(ainv, ctx, host, [var])
                continue
            got = rendered_values(ainv, ctx, host, [var])[var]
            assert typeless(plain(got)) == typeless(value), f"{case.name}: {host}: {var}"


def test_the_corpus_has_templated_variables(oracle):
    found = {(c, h, v) for c, o in oracle.items() for h, vs in o["rendered"].items() for v in vs}
    assert len(found) >= 20 and len({c for c, _h, _v in found}) >= 1


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


def test_oracle_renders_as_the_ansible_command(oracle, tmp_path):
    """The oracle's rendered values are what `ansible HOST -m debug -a var=NAME` prints, for every templated
    variable of every case that has one (derived from the oracle's reading of the data)."""
    cmd = shutil.which("ansible", path=str(Path(sys.executable).parent))
    assert cmd, "ansible missing: run scripts/setup.sh (60-bench.sh installs Ansible)"
    cases = [c for c in CASES if any(oracle[c.name]["rendered"].values())]
    assert cases, "the corpus has no templated variable"
    for case in cases:
        rendered = oracle[case.name]["rendered"]
        for var in sorted({v for vs in rendered.values() for v in vs}):
            r = subprocess.run(
                [cmd, "all", "-i", str(inventory_file(case)), "-c", "local", "-o", "-m", "debug", "-a", f"var={var}"],
                cwd=tmp_path,
                env=ansible_env(tmp_path),
                capture_output=True,
                text=True,
                timeout=120,
            )
            seen = set()
            for line in r.stdout.splitlines():
                host, _, rest = line.partition(" | ")
                if "=>" not in rest or var not in rendered.get(host, {}):
                    continue
                want = rendered[host][var]
                if isinstance(want, dict) and set(want) == {"error"}:
                    continue
                shown = json.loads(rest.split("=>", 1)[1])[var]
                assert typeless(shown) == typeless(want), f"{case.name}: {host}: {var}: {r.stderr[-500:]}"
                seen.add(host)
            wanted = {
                h for h, vs in rendered.items() if var in vs and not (isinstance(vs[var], dict) and "error" in vs[var])
            }
            assert seen == wanted, f"{case.name}: {var}: ansible printed {sorted(seen)}\n{r.stdout[-2000:]}"
