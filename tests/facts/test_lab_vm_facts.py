"""Facts from the real 4-NUMA-node lab VM (qemu TCG, busybox userland, dropbear): numaforge.lab.vm.

The VM is reused when it already runs (and then left running); otherwise the test boots it and stops it
again. Its userland has no lspci/numactl/lscpu, so this is also the real "tools missing" case."""

from __future__ import annotations

import pytest

from numaforge.bios.os_verify import CANNOT, OK, verify
from numaforge.errors import NumaforgeError
from numaforge.facts import captures as C
from numaforge.facts import parse_facts, template_facts
from numaforge.facts.collect import collect_ssh
from numaforge.inventory.loader import load_inventory
from numaforge.lab import services, vm

pytestmark = pytest.mark.lab_vm


@pytest.fixture(scope="module")
def lab_host():
    try:
        info = vm.up(kernel="lab")
    except NumaforgeError:
        info = vm.up(kernel="debian")  # the kpatch helper's lab kernel is not built on this machine yet
    try:
        inv = load_inventory(str(services.write_lab_inventory(ssh_port=info.ssh_port)))  # as lab-up does
        yield inv.hosts["lab-vm"]
    finally:
        if not info.already_running:
            vm.down()


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
