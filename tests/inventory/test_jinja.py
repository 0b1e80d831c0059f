"""Templated inventory variables (issue 39 item 10) as numaforge renders them, with no Ansible needed: the values of
the conformance corpus' templated case, and every way a template can fail, each naming the variable and its
file:line. (tests/inventory/test_ansible_conformance.py checks the rendered values against Ansible itself.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from numaforge.errors import InventoryError
from numaforge.inventory.loader import load_inventory

from .helpers import write

CASE = Path(__file__).parents[1] / "data" / "ansible" / "26-jinja-vars" / "hosts.yml"


def test_the_corpus_case_renders_through_precedence_nesting_and_magic_variables():
    inv = load_inventory(CASE)
    a, b, builder = inv.hosts["gpu-a"], inv.hosts["gpu-b"], inv.hosts["builder"]
    # bmc_url (all) -> bmc_ip (all) -> oob_prefix (all), rack (group), slot (host); bmc_port from the group
    assert (a.bmc.url, b.bmc.url, builder.bmc.url) == (
        "https://10.9.1.11:8443",
        "https://10.9.200.12:8443",  # gpu-b's own literal bmc_ip wins under the same template
        "https://10.9.7.1:443",
    )
    assert (a.ssh.address, a.ssh.port, a.ssh.user) == ("10.9.100.11", 2211, "root")
    assert (b.ssh.address, b.ssh.port, b.ssh.user) == ("10.9.100.12", 2212, "ops1")
    assert a.vars["fqdn"] == "gpu-a.lab.example.net" and a.vars["short"] == "A"
    assert a.vars["peers"] == 2 and a.vars["ssh_port"] == 2211, "one expression keeps its type"
    assert a.vars["role_label"] == "gpu" and builder.vars["note"] == "none"


def _ansible(tmp_path, host_vars: str, extra: str = "") -> Path:
    return write(
        tmp_path,
        "all:\n  hosts:\n    g1:\n" + "".join(f"      {line}\n" for line in host_vars.strip().splitlines()) + extra,
    )


FAILURES = {
    "undefined": (
        'ansible_host: "{{ oob_ip }}"',
        1,
        ["variable ansible_host", "'oob_ip' is undefined"],
        "define oob_ip",
    ),
    "undefined, nested": (
        'ansible_host: "{{ addr }}"\naddr: "{{ prefix }}.5"',
        2,
        ["variable addr", "'prefix' is undefined", "needed by ansible_host"],
        "define prefix",
    ),
    "loop": (
        'ansible_host: "{{ a }}"\na: "{{ b }}"\nb: "{{ a }}"',
        2,
        ["variable a refers to itself (a -> b -> a)"],
        "recursive loop",
    ),
    "self loop": ('numaforge_bmc_url: "{{ numaforge_bmc_url }}/x"', 1, ["refers to itself"], "does not use the others"),
    "syntax": (
        'ansible_host: "{{ addr "',
        1,
        ["variable ansible_host is not a valid Jinja2 template"],
        "fix the template",
    ),
    "unknown filter": (
        'ansible_host: "{{ net | ipaddr }}"\nnet: 10.0.0.1',
        1,
        ["No filter named 'ipaddr'"],
        "regex_replace",
    ),
    "sandbox": (
        "ansible_host: \"{{ ''.__class__.__mro__ }}\"",
        1,
        ["variable ansible_host tried something the template sandbox forbids"],
        "only read variables",
    ),
    "budget": ("ansible_user: \"{{ 'x' * 10**9 }}\"", 1, ["template budget"], "simplify"),
    "expression": ('ansible_port: "{{ 22 // 0 }}"', 1, ["ZeroDivisionError"], "fix the expression"),
}


@pytest.mark.parametrize("case", list(FAILURES))
def test_a_template_that_cannot_render_names_the_variable_and_its_line(tmp_path, case):
    host_vars, line, says, fix = FAILURES[case]
    p = _ansible(tmp_path, host_vars)
    with pytest.raises(InventoryError) as info:
        load_inventory(p)
    err = info.value
    assert err.where == f"{p}:{3 + line}", err.render()
    for fragment in says:
        assert fragment in err.what, err.render()
    assert fix in err.fix and "Traceback" not in err.render()


def test_a_variable_numaforge_does_not_read_keeps_its_text_when_it_cannot_render(tmp_path):
    """Ansible fails such a variable only when a play uses it: an unrelated template must not stop a run."""
    p = _ansible(
        tmp_path, 'ansible_host: 10.0.0.1\npy: "{{ ansible_playbook_python }}"\nok: "{{ inventory_hostname }}"'
    )
    h = load_inventory(p).hosts["g1"]
    assert h.vars["py"] == "{{ ansible_playbook_python }}" and h.vars["ok"] == "g1"


def test_ini_values_render_too(tmp_path):
    p = write(
        tmp_path,
        "[gpu]\ng1 slot=4\ng2 slot=5\n[gpu:vars]\nansible_host=10.1.0.{{ slot }}\nansible_port='{{ 2200 + slot }}'\n",
        "hosts.ini",
    )
    inv = load_inventory(p)
    assert [(h.ssh.address, h.ssh.port) for h in inv.hosts.values()] == [("10.1.0.4", 2204), ("10.1.0.5", 2205)]


def test_the_same_template_for_many_hosts_renders_per_host(tmp_path):
    hosts = "".join(f"    n{i:03d}: {{slot: {i}}}\n" for i in range(300))
    p = write(
        tmp_path, 'all:\n  vars:\n    ansible_host: "10.2.{{ slot // 256 }}.{{ slot % 256 }}"\n  hosts:\n' + hosts
    )
    inv = load_inventory(p)
    assert [h.ssh.address for h in inv.hosts.values()] == [f"10.2.{i // 256}.{i % 256}" for i in range(300)]
