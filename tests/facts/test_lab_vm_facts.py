"""Facts from the real 4-NUMA-node lab VM (qemu TCG, busybox userland, dropbear): numaforge.lab.vm.

It only reads, so it runs on the session VM (tests/conftest.py's `lab`, the lab kernel, else Debian's), reached
through the lab inventory as lab-up writes it. Its userland has no lspci/numactl/lscpu, so this is also the real
"tools missing" case."""

from __future__ import annotations

import pytest

from numaforge.bios.os_verify import CANNOT, OK, verify
from numaforge.facts import captures as C
from numaforge.facts import parse_facts, template_facts
from numaforge.facts.collect import collect_ssh
from numaforge.inventory.loader import load_inventory
from numaforge.lab import services

pytestmark = pytest.mark.lab_vm


@pytest.fixture(scope="module")
def lab_host(lab):
    inv = services.write_lab_inventory(ssh_port=lab.info.ssh_port, state_dir=lab.state_dir)  # as lab-up does
    return load_inventory(str(inv)).hosts["lab-vm"]


def test_lab_vm_facts_and_verdicts(lab_host):
    caps = collect_ssh(lab_host)
    f = parse_facts(caps)
    assert [n.cpus for n in f.numa.nodes] == [[0], [1], [2], [3]]
    assert f.numa.nodes[0].distances == [10, 16, 32, 32]
    assert f.numa.balancing == 1  # the VM boots with numa_balancing=enable
    assert f.cpu.sockets == 4 and f.kernel.release.startswith("5.10")
    for tool in (C.LSPCI, C.NUMACTL, C.LSCPU):
        assert "is not installed on the host" in caps.absent[tool]
    t = {
        v.setting: v
        for v in verify({"numa_nodes_per_socket": 1, "pcie_acs": False, "pcie_aspm": "disabled"}, f, device_rows=False)
    }
    assert t["numa_nodes_per_socket"].verdict == OK
    assert t["pcie_acs"].verdict == CANNOT and "lspci is not installed" in t["pcie_acs"].why
    assert t["pcie_aspm"].verdict == CANNOT
    assert template_facts(f)["numa_nodes"] == 4
