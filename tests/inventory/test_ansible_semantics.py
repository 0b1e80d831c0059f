"""Issue 12 items 8 and 11, issue 16 item 4: Ansible semantics numaforge used to get wrong, and input limits.

Each test failed on the loader before numaforge/inventory/ansible.py (ansible_host lost for a host in two
groups, "defined twice" for a child group defined later, RecursionError for deep nesting, /dev/zero read to
MemoryError, credentials in bmc.url accepted, `!dead*` matching nothing).
"""

from __future__ import annotations

import os
import re
import time

import pytest

from numaforge.errors import InventoryError, SelectionError
from numaforge.inventory.graph import MAX_GROUP_DEPTH
from numaforge.inventory.loader import load_inventory

from .helpers import write


def test_host_in_two_groups_keeps_ansible_host_yaml(tmp_path):
    inv = load_inventory(
        write(
            tmp_path,
            """
all:
  children:
    dell:
      hosts:
        gpu01: {ansible_host: 10.20.0.11, rack: b07}
    canary:
      hosts:
        gpu01:
""",
        )
    )
    h = inv.hosts["gpu01"]
    assert h.ssh.address == "10.20.0.11" and h.vars == {"rack": "b07"}
    assert h.groups == ["canary", "dell"]


def test_host_in_two_groups_keeps_ansible_host_ini(tmp_path):
    inv = load_inventory(
        write(tmp_path, "[dell]\ngpu01 ansible_host=10.20.0.11 ansible_port=2222\n\n[canary]\ngpu01\n", "hosts.ini")
    )
    assert (inv.hosts["gpu01"].ssh.address, inv.hosts["gpu01"].ssh.port) == ("10.20.0.11", 2222)
    assert inv.format == "ansible"


def test_child_group_defined_later_is_valid(tmp_path):
    inv = load_inventory(
        write(
            tmp_path,
            """
gpu:
  children:
    dell:
dell:
  hosts:
    r1: {ansible_host: 10.0.0.1}
""",
        )
    )
    assert inv.group_members("gpu") == ["r1"] and inv.groups["gpu"].children == ["dell"]
    ini = load_inventory(write(tmp_path, "[gpu:children]\ndell\n\n[dell]\nr1\n", "later.ini"))
    assert ini.group_members("gpu") == ["r1"]


def test_ini_child_group_never_defined_is_an_error(tmp_path):
    with pytest.raises(InventoryError, match="names group 'dell', which is never defined") as info:
        load_inventory(write(tmp_path, "[gpu:children]\ndell\n", "hosts.ini"))
    assert info.value.where.endswith("hosts.ini:2")


def _chain_native(n: int) -> str:
    lines = ["hosts:", "  h: {ssh: {address: h}}", "groups:"]
    for i in range(n):
        lines.append(f"  g{i}: {{children: [g{i + 1}]}}" if i < n - 1 else f"  g{i}: {{hosts: [h]}}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("fmt", ["native", "ini"])
def test_1500_nested_groups_give_a_clear_error(tmp_path, fmt):
    if fmt == "native":
        p = write(tmp_path, _chain_native(1500))
    else:
        text = "".join(f"[g{i}:children]\ng{i + 1}\n" for i in range(1499)) + "[g1499]\nh\n"
        p = write(tmp_path, text, "hosts.ini")
    t0 = time.monotonic()
    with pytest.raises(InventoryError, match=f"at most {MAX_GROUP_DEPTH} levels") as info:
        load_inventory(p)
    assert time.monotonic() - t0 < 10
    assert "flatten" in info.value.fix and info.value.where.startswith(str(p))


def test_nesting_at_the_bound_loads(tmp_path):
    inv = load_inventory(write(tmp_path, _chain_native(MAX_GROUP_DEPTH)))
    assert inv.hosts["h"].groups[0] == "g0" and len(inv.hosts["h"].groups) == MAX_GROUP_DEPTH


def test_deep_ansible_yaml_nesting_is_an_error_not_a_traceback(tmp_path):
    text = "all:\n  children:\n" + "".join(
        " " * (4 + 4 * i) + f"g{i}:\n" + " " * (6 + 4 * i) + "children:\n" for i in range(1500)
    )
    with pytest.raises(InventoryError):
        load_inventory(write(tmp_path, text))


def test_group_cycle_named(tmp_path):
    with pytest.raises(InventoryError, match="groups form a cycle: a -> b -> a"):
        load_inventory(write(tmp_path, "[a:children]\nb\n[b:children]\na\n[a]\nh\n[b]\nh2\n", "hosts.ini"))


def test_inventory_must_be_a_regular_file(tmp_path):
    t0 = time.monotonic()
    with pytest.raises(InventoryError, match="not a regular file"):
        load_inventory("/dev/zero")
    assert time.monotonic() - t0 < 2
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(InventoryError, match="not a regular file"):
        load_inventory(fifo)  # would block forever if opened
    with pytest.raises(InventoryError, match="is a directory") as info:
        load_inventory(tmp_path)
    assert "--inventory" in info.value.fix


def test_oversized_inventory_refused_before_reading(tmp_path):
    p = tmp_path / "big.yaml"
    with open(p, "wb") as fh:
        fh.truncate(17 * 1024 * 1024)
    with pytest.raises(InventoryError, match="more than the"):
        load_inventory(p)


@pytest.mark.parametrize(
    "url", ["https://admin:Sup3rS3cret@10.0.0.5", "https://admin@10.0.0.5:443", "https://:Sup3rS3cret@bmc"]
)
def test_credentials_in_bmc_url_refused_and_not_echoed(tmp_path, url):
    p = write(tmp_path, f"all:\n  hosts:\n    g1:\n      numaforge_bmc: {{url: '{url}', password: env:P}}\n")
    with pytest.raises(InventoryError, match="carries credentials") as info:
        load_inventory(p)
    assert "Sup3rS3cret" not in info.value.render() and "admin" not in info.value.render()
    assert info.value.where == f"{p}:4"


def test_group_vars_error_points_at_the_vars_file(tmp_path):
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "gpu.yml").write_text("# shared\nansible_port: not-a-port\n")
    p = write(tmp_path, "[gpu]\ng1\n", "hosts.ini")
    with pytest.raises(InventoryError, match="ssh.port must be an integer") as info:
        load_inventory(p)
    assert info.value.where == f"{tmp_path / 'group_vars' / 'gpu.yml'}:2"


def test_vault_vars_file_needs_a_password_and_templates_render(tmp_path, monkeypatch):
    """Issue 39 item 10: these were refused ("numaforge does not evaluate inventory templates", "Vault files
    cannot be read"); a vault file now asks for the vault password and a template is rendered."""
    monkeypatch.delenv("ANSIBLE_VAULT_PASSWORD_FILE", raising=False)
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "g1.yml").write_text("$ANSIBLE_VAULT;1.1;AES256\n6162\n")
    p = write(tmp_path, "[gpu]\ng1\n", "hosts.ini")
    with pytest.raises(InventoryError, match="encrypted with Ansible Vault and no vault password") as info:
        load_inventory(p)
    assert "--vault-password-file" in info.value.fix and info.value.where == str(tmp_path / "host_vars" / "g1.yml")
    q = write(tmp_path, "[gpu]\ng2 ansible_host='{{ inventory_hostname }}.example'\n", "t.ini")
    assert load_inventory(q).hosts["g2"].ssh.address == "g2.example"


@pytest.mark.parametrize(
    "pattern,msg",
    [
        ("gpu[1:3:0]", "at least 1"),
        ("gpu[01:5]", "same width"),
        ("gpu[a:1]", "neither numeric"),
        ("gpu[1:]", "no end"),
        ("gpu[0:999999]", "more than"),
        ("gpu[z:a]", "begin after end"),
    ],
)
def test_bad_ranges(tmp_path, pattern, msg):
    with pytest.raises(InventoryError, match=msg) as info:
        load_inventory(write(tmp_path, f"[gpu]\n{pattern}\n", "hosts.ini"))
    assert info.value.where.endswith("hosts.ini:2")


def test_ansible_connection_local_is_a_local_host(tmp_path):
    inv = load_inventory(write(tmp_path, "[build]\nbuildbox ansible_connection=local\n", "hosts.ini"))
    b = inv.hosts["buildbox"]
    assert b.connection == "local" and b.ssh is None


FLEET = """
[fra_gpu]
fra-gpu[01:04]
[ams_gpu]
ams-gpu[01:02]
[dead]
fra-gpu03
ams-gpu02
[canary]
fra-gpu01
"""


@pytest.mark.parametrize(
    "limit,want",
    [
        ("!dead*", ["fra-gpu01", "fra-gpu02", "fra-gpu04", "ams-gpu01"]),
        ("fra_gpu:&canary", ["fra-gpu01"]),
        ("~ams-.*", ["ams-gpu01", "ams-gpu02"]),
        ("fra_gpu[1:2],!dead", ["fra-gpu02"]),
        ("*gpu0[!34]", ["fra-gpu01", "fra-gpu02", "ams-gpu01", "ams-gpu02"]),
    ],
)
def test_limit_patterns_through_select(tmp_path, limit, want):
    inv = load_inventory(write(tmp_path, FLEET, "hosts.ini"))
    assert [h.name for h in inv.select(limit=limit)] == want


def test_limit_at_file_and_typos(tmp_path):
    inv = load_inventory(write(tmp_path, FLEET, "hosts.ini"))
    (tmp_path / "retry").write_text("fra-gpu02\nams_gpu\n")
    assert [h.name for h in inv.select(limit=f"@{tmp_path / 'retry'}")] == ["fra-gpu02", "ams-gpu01", "ams-gpu02"]
    with pytest.raises(SelectionError, match="names no host or group") as info:
        inv.select(limit="canry")
    assert "did you mean 'canary'" in info.value.fix
    with pytest.raises(SelectionError, match="not found"):
        inv.select(limit="@/nonexistent/list")
    with pytest.raises(SelectionError, match="invalid pattern"):
        inv.select(limit="~(unclosed")


def _fleet_ranges() -> list[tuple[str, str, int, int]]:
    """(group-ish prefix, zero-padded prefix, first, last) of every range in FLEET (derived from the data)."""
    return [
        (m.group(1), m.group(1) + m.group(2)[:-1], int(m.group(2)), int(m.group(3)))
        for m in re.finditer(r"^([a-z-]+)\[(\d+):(\d+)\]$", FLEET, re.M)
    ]


@pytest.mark.parametrize("prefix,padded,first,last", _fleet_ranges())
def test_a_subscript_that_matches_nothing_says_how_ansible_reads_it(tmp_path, prefix, padded, first, last):
    """Issue 39 item 10: `gpu0[1-3]` is a subscript in Ansible (hosts 1..3 of what `gpu0` matches), so it selects
    nothing; the error says so and suggests what was meant (was: "the host selection matched no host")."""
    inv = load_inventory(write(tmp_path, FLEET, "hosts.ini"))
    meant = [f"{padded}{i}" for i in range(first, last + 1)]
    for written in (f"{padded}[{first}-{last}]", f"{prefix}[{first:02d}:{last:02d}]"):
        with pytest.raises(SelectionError) as info:
            inv.select(limit=written)
        err = info.value
        assert "subscript" in err.what and "counting from 0" in err.what, err.render()
        assert "names no host or group" in err.what, err.render()
        assert f"--limit '{','.join(meant)}'" in err.fix, err.render()
        assert [h.name for h in inv.select(limit=",".join(meant))] == meant
        with pytest.raises(SelectionError) as by_host:
            inv.select(hosts=[written])
        assert "one exact host name" in by_host.value.what and ",".join(meant) in by_host.value.fix
    regex = f"~{padded}[{first}-{last}]$"
    with pytest.raises(SelectionError) as info:
        inv.select(limit=f"{padded}[{first}-{last}]")
    assert regex in info.value.fix
    assert [h.name for h in inv.select(limit=regex)] == meant


def test_a_subscript_past_the_end_says_how_many_hosts_there_are(tmp_path):
    inv = load_inventory(write(tmp_path, FLEET, "hosts.ini"))
    with pytest.raises(SelectionError) as info:
        inv.select(limit="ams_gpu[5:6]")
    assert "'ams_gpu' matches 2 host(s), none at position(s) 5 to 6" in info.value.what
