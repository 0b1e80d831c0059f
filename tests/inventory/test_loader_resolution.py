"""Well-formed inventories: inheritance order, Ansible translation, relative paths, host selection."""

from __future__ import annotations

from pathlib import Path

import pytest

from numaforge.errors import SelectionError
from numaforge.inventory.loader import load_inventory

from .helpers import write

ROOT = Path(__file__).parents[2]


def test_precedence_defaults_outer_inner_host(tmp_path):
    inv = load_inventory(
        write(
            tmp_path,
            """
vars: {level: top, site: fra1}
defaults:
  ssh: {user: deploy, port: 2200}
  bmc: {username: svc, password: env:BMC_PW}
hosts:
  h1:
    ssh: {address: 10.0.0.1}
    vars: {level: host}
  h2:
    ssh: {address: 10.0.0.2, port: 22}
    bmc: {url: "https://10.9.0.2"}
groups:
  outer:
    children: [inner]
    vars: {level: outer, rack: r1}
    ssh: {user: ops}
  inner:
    hosts: [h1, h2]
    vars: {level: inner}
    ssh: {user: gpuops}
""",
        )
    )
    h1, h2 = inv.hosts["h1"], inv.hosts["h2"]
    assert h1.groups == ["outer", "inner"]
    assert h1.vars == {"level": "host", "site": "fra1", "rack": "r1"}
    assert h2.vars["level"] == "inner"
    assert (h1.ssh.user, h1.ssh.port) == ("gpuops", 2200)
    assert h2.ssh.port == 22
    # inherited bmc defaults without a url give h1 no BMC; h2 has one with the inherited credentials
    assert h1.bmc is None
    assert h2.bmc.username == "svc" and str(h2.bmc.password) == "env:BMC_PW"


def test_relative_paths_resolve_against_the_inventory_file(tmp_path):
    sub = tmp_path / "inv"
    sub.mkdir()
    inv = load_inventory(
        write(
            sub,
            """
hosts:
  h:
    ssh: {address: h.example, key_file: keys/id, known_hosts: ~/.ssh/known_hosts}
    bmc: {url: "https://bmc.example", password: "file:secrets/bmc", ca_bundle: /etc/ca.pem}
""",
        )
    )
    h = inv.hosts["h"]
    assert h.ssh.key_file == str(sub / "keys" / "id")
    assert h.ssh.known_hosts == "~/.ssh/known_hosts"
    assert h.bmc.password.value == str(sub / "secrets" / "bmc")
    assert h.bmc.ca_bundle == "/etc/ca.pem"


def test_realistic_ansible_inventory():
    inv = load_inventory(ROOT / "inventory" / "example-ansible.yaml")
    assert inv.format == "ansible"
    assert set(inv.groups) == {"gpu", "dell_r7525", "supermicro_as4124", "build"}
    assert inv.group_members("gpu") == ["gpu-r7525-01", "gpu-r7525-02", "gpu-as4124-01"]
    h = inv.hosts["gpu-r7525-02"]
    assert (h.ssh.address, h.ssh.port, h.ssh.user, h.ssh.sudo) == ("10.20.0.12", 2200, "deploy", True)
    assert h.bmc.vendor == "dell" and h.bmc.username == "numaforge"
    assert h.kernel.target == "debian-5.10.0-46-amd64"
    assert h.bios_profile == "epyc-gpudirect"
    sm = inv.hosts["gpu-as4124-01"]
    assert sm.ssh.key_file == "~/.ssh/fleet_ed25519" and sm.vars == {"rack": "b07"}
    assert sm.hardware.nics == ["0000:81:00.0"]
    # ansible_connection: local is a local host, not an SSH host
    assert inv.hosts["buildbox"].connection == "local" and inv.hosts["buildbox"].ssh is None
    assert inv.hosts["buildbox"].bmc is None and inv.hosts["buildbox"].kernel.release == "5.10.0-46-amd64"
    # a host without ansible_host connects to its inventory name, as Ansible does
    assert inv.hosts["gpu-r7525-01"].ssh.address == "10.20.0.11"


def test_native_example_and_lab_inventory_load():
    fleet = load_inventory(ROOT / "inventory" / "example-fleet.yaml")
    assert fleet.hosts["gpu-dl385-01"].bmc.username == "Administrator"
    assert fleet.hosts["gpu-dl385-01"].vars["gpus_per_node"] == 1
    lab = load_inventory(ROOT / "inventory" / "lab.yaml")
    vm = lab.hosts["lab-vm"]
    assert vm.ssh.port == 2222 and vm.ssh.known_hosts.endswith(".lab/ssh/known_hosts")
    assert vm.bmc.ca_bundle.endswith(".lab/bmc/ca.pem") and not vm.bmc.insecure
    assert vm.kernel.target == "lab"


def test_plaintext_secret_only_when_allowed(tmp_path):
    p = write(tmp_path, "hosts:\n  h:\n    bmc: {url: 'https://b', password: calvin}\n")
    inv = load_inventory(p, allow_plaintext_secrets=True)
    assert str(inv.hosts["h"].bmc.password) == "********"
    assert inv.hosts["h"].bmc.password.resolve() == "calvin"


@pytest.fixture
def fleet():
    return load_inventory(ROOT / "inventory" / "example-fleet.yaml")


def test_select_by_host_group_and_limit(fleet):
    assert [h.name for h in fleet.select()] == ["gpu-r7525-01", "gpu-r7525-02", "gpu-dl385-01"]
    assert [h.name for h in fleet.select(hosts=["gpu-dl385-01"])] == ["gpu-dl385-01"]
    assert [h.name for h in fleet.select(groups=["dell-r7525"])] == ["gpu-r7525-01", "gpu-r7525-02"]
    assert [h.name for h in fleet.select(groups=["gpu"], limit="*-02,hpe-dl385")] == ["gpu-r7525-02", "gpu-dl385-01"]
    assert [h.name for h in fleet.select(hosts=["gpu-r7525-01"], groups=["dell-r7525"])] == [
        "gpu-r7525-01",
        "gpu-r7525-02",
    ]


def test_select_errors_name_the_problem(fleet):
    with pytest.raises(SelectionError, match="unknown host 'gpu-r7525-1'") as info:
        fleet.select(hosts=["gpu-r7525-1"])
    assert "did you mean 'gpu-r7525-01'" in info.value.fix
    with pytest.raises(SelectionError, match="unknown group"):
        fleet.select(groups=["amd"])
    with pytest.raises(SelectionError, match="matched no host"):
        fleet.select(limit="nothing-*")
