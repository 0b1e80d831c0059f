"""Pure parser tests on the capture corpus (tests/data/facts/): real captures of this build server and
EPYC+GPU fixtures written in the same shape from public documentation (see make_fixtures.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numaforge.facts import Captures, parse_facts, template_facts
from numaforge.facts import captures as C
from numaforge.facts.captures import CaptureError, cpulist, parse_cpulist, parse_head
from numaforge.facts.cpu import lscpu_l3_instances, parse_lscpu
from numaforge.facts.iommu import iommu_mode
from numaforge.facts.kernel import parse_cmdline
from numaforge.facts.numa import parse_node_sysfs, parse_numactl_hardware
from numaforge.facts.pci import parse_lspci_vvv, parse_pci_links

from .helpers import MACHINES, captures, facts


# ------------------------------------------------------------------ real capture of this build server
def test_build_server_real_capture():
    f = facts("this-build-server")
    assert [n.id for n in f.numa.nodes] == [0] and f.numa.nodes[0].cpus == [0, 1]
    assert f.numa.nodes[0].distances == [10] and f.numa.nodes[0].mem_kb > 1024 * 1024
    assert f.numa.source == "sysfs" and f.numa.balancing == 0
    assert (f.cpu.sockets, f.cpu.cpus, f.cpu.l3_count, f.cpu.model) == (1, 2, 1, "AMD EPYC")
    assert f.cpu.l3_domains == [[0, 1]]
    assert sorted(f.pci.devices) == [f"0000:00:0{i}.0" for i in range(6)]
    assert [n.address for n in f.pci.nics] == ["0000:00:03.0"] and f.pci.gpus == []
    nic = f.pci.devices["0000:00:03.0"]
    assert (nic.vendor, nic.device, nic.driver, nic.numa_node) == ("1af4", "1041", "virtio-pci", -1)
    assert f.iommu.groups == 0 and f.iommu.mode == "default"
    assert f.kernel.release and f.kernel.params["console"] == "ttyS0" and f.kernel.livepatches == []
    assert f.absent == {}


def test_unprivileged_lspci_marks_capabilities_unknown():
    f = facts("this-build-server-unprivileged")
    assert all(d.caps_denied for d in f.pci.devices.values() if d.address != "0000:00:00.0")
    assert not f.pci.devices["0000:00:00.0"].caps_denied  # host bridge has no capability list at all
    assert f.numa.nodes[0].cpus == [0, 1]  # sysfs is world-readable


WITHOUT_LSPCI = ["epyc-no-lspci", "lab-vm-4node-busybox"]
WITHOUT_NUMACTL = ["lab-vm-4node-busybox"]


def test_which_machines_lack_tools():
    assert [m for m in MACHINES if captures(m).get(C.LSPCI) is None] == WITHOUT_LSPCI
    assert [m for m in MACHINES if captures(m).get(C.NUMACTL) is None] == WITHOUT_NUMACTL


@pytest.mark.parametrize("machine", [m for m in MACHINES if m not in WITHOUT_NUMACTL])
def test_numactl_and_sysfs_agree(machine):
    cap = captures(machine)
    sysfs = parse_node_sysfs(cap.get(C.SYS_NODE))
    numactl = parse_numactl_hardware(cap.get(C.NUMACTL))
    assert [(n.id, n.cpus, n.distances) for n in sysfs] == [(n.id, n.cpus, n.distances) for n in numactl]
    for a, b in zip(sysfs, numactl):
        assert abs(a.mem_kb - b.mem_kb) < 1024 * 1024  # numactl rounds to MB


@pytest.mark.parametrize("machine", [m for m in MACHINES if m not in WITHOUT_LSPCI])
def test_sysfs_links_and_lspci_bus_ranges_give_the_same_parents(machine):
    cap = captures(machine)
    lspci = parse_lspci_vvv(cap.get(C.LSPCI))
    links = parse_pci_links(cap.get(C.PCI_LINKS))
    assert set(lspci) == set(links)
    for addr, chain in links.items():
        assert lspci[addr].parent == (chain[-1] if chain else None), addr


# ------------------------------------------------------------------ EPYC fixtures
def test_epyc_nps1_layout():
    f = facts("epyc-7763-2s-nps1-4gpu")
    assert len(f.numa.nodes) == 2 and f.cpu.sockets == 2 and f.cpu.cpus == 256 and f.cpu.l3_count == 16
    assert f.cpu.threads_per_core == 2 and f.numa.nodes[1].distances == [32, 10]
    assert [g.address for g in f.pci.gpus] == ["0000:43:00.0", "0000:63:00.0", "0000:c3:00.0", "0000:e3:00.0"]
    assert "0000:22:00.0" not in [g.address for g in f.pci.gpus], "the BMC's ASPEED VGA is not a GPU"
    gpu = f.pci.devices["0000:c3:00.0"]
    assert (gpu.physical_slot, gpu.numa_node, gpu.iommu_group, gpu.link_speed, gpu.link_width) == (
        "3",
        1,
        28,
        "16GT/s",
        16,
    )
    assert gpu.aspm_supported == frozenset() and gpu.aspm_enabled == frozenset()
    assert f.pci.bridges_above("0000:c3:00.0") == ["0000:c0:01.1", "0000:c1:00.0", "0000:c2:00.0"]
    assert f.pci.bridges_between("0000:c3:00.0", "0000:c4:00.0") == ["0000:c2:00.0", "0000:c2:01.0"]
    dsp = f.pci.devices["0000:c2:00.0"]
    assert dsp.express_type == "Downstream Port" and dsp.acs_p2p_blocking() == []
    assert dsp.acs_cap["SrcValid"] is True and dsp.acs_ctl["SrcValid"] is False
    rp = f.pci.devices["0000:c0:01.1"]
    assert rp.acs_p2p_blocking() == ["SrcValid", "ReqRedir", "CmpltRedir"]
    assert f.pci.devices["0000:c4:00.0"].sriov_total_vfs == 8
    assert f.iommu.groups == 72 and f.iommu.mode == "passthrough"
    [lp] = f.kernel.livepatches
    assert (lp.name, lp.state) == ("kpatch_sched_numa_prefer_local_fallback", "enabled")


def test_epyc_llc_as_numa_nodes_are_l3_domains():
    f = facts("epyc-llc-as-numa")
    assert sorted(n.cpus for n in f.numa.nodes) == f.cpu.l3_domains and len(f.numa.nodes) == 16


def test_no_lspci_still_has_sysfs_pci_facts():
    f = facts("epyc-no-lspci")
    assert "lspci is not installed" in f.pci.lspci_missing
    assert len(f.pci.gpus) == 4 and f.pci.devices["0000:c3:00.0"].numa_node == 1
    assert f.pci.devices["0000:c3:00.0"].aspm_enabled is None
    assert f.pci.bridges_above("0000:c3:00.0") == ["0000:c0:01.1", "0000:c1:00.0", "0000:c2:00.0"]


def test_template_facts_feed_profiles():
    t = template_facts(facts("epyc-7763-2s-nps1-4gpu"))
    assert t == {
        "gpu_count": 4,
        "gpus": ["0000:43:00.0", "0000:63:00.0", "0000:c3:00.0", "0000:e3:00.0"],
        "gpu_slots": ["1", "2", "3", "4"],
        "nic_count": 4,
        "nics": ["0000:44:00.0", "0000:64:00.0", "0000:c4:00.0", "0000:e4:00.0"],
        "nic_slots": ["11", "12", "13", "14"],
        "numa_nodes": 2,
        "sockets": 2,
        "l3_domains": 16,
        "cpu_model": "AMD EPYC 7763 64-Core Processor",
    }


def test_template_facts_say_unknown_not_zero():
    t = template_facts(parse_facts(Captures(source="empty", absent={C.LSPCI: "lspci is not installed"})))
    assert t["gpu_count"] is None and t["numa_nodes"] is None and t["sockets"] is None


# ------------------------------------------------------------------ small formats
LSPCI_OLD_LNKSTA = """\
0000:3b:00.0 Ethernet controller [0200]: Mellanox Technologies MT27800 Family [ConnectX-5] [15b3:1017]
\tCapabilities: [60] Express (v2) Endpoint, MSI 00
\t\tLnkCap:\tPort #0, Speed 8GT/s, Width x16, ASPM not supported
\t\tLnkCtl:\tASPM L0s L1 Enabled; RCB 64 bytes Disabled- CommClk+
\t\tLnkSta:\tSpeed 8GT/s, Width x8, TrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-
"""


def test_lspci_older_lnksta_and_combined_aspm():
    d = parse_lspci_vvv(LSPCI_OLD_LNKSTA)["0000:3b:00.0"]
    assert (d.link_speed, d.link_width, d.link_degraded) == ("8GT/s", 8, False)
    assert d.aspm_enabled == {"L0s", "L1"} and d.is_nic and d.parent is None


def test_lspci_downgraded_link():
    d = facts("epyc-aspm-l1-on-nics").pci.devices["0000:63:00.0"]
    assert (d.link_speed, d.link_width, d.link_degraded) == ("8GT/s", 8, True)


def test_lscpu_l3_instances_only_in_new_util_linux():
    assert lscpu_l3_instances(parse_lscpu("L3 cache:  256 MiB (8 instances)\n")) == 8
    assert lscpu_l3_instances(parse_lscpu("L3:  32 MiB (1 instance)\n")) == 1
    assert lscpu_l3_instances(parse_lscpu("L3 cache:  32768K\n")) is None  # util-linux 2.36 (bullseye)


def test_cmdline_stops_at_init_arguments():
    p = parse_cmdline('ro quiet iommu=pt amd_iommu=on "dyndbg=file x +p" -- --init-arg=1')
    assert p == {"ro": None, "quiet": None, "iommu": "pt", "amd_iommu": "on", "dyndbg": "file x +p"}


@pytest.mark.parametrize(
    "cmdline,mode",
    [
        ("iommu=pt", "passthrough"),
        ("iommu.passthrough=1", "passthrough"),
        ("amd_iommu=off", "off"),
        ("iommu=off", "off"),
        ("iommu.passthrough=0", "translated"),
        ("quiet", "default"),
    ],
)
def test_iommu_mode_from_cmdline(cmdline, mode):
    assert iommu_mode(parse_cmdline(cmdline))[0] == mode


def test_head_dump_split():
    text = "==> /a <==\n1\n\n==> /b c <==\nx\ny\n\n==> /empty <==\n\n==> /d <==\n0-3\n"
    assert parse_head(text) == {"/a": "1", "/b c": "x\ny", "/empty": "", "/d": "0-3"}


@given(st.sets(st.integers(min_value=0, max_value=600), max_size=80))
def test_cpulist_roundtrip(cpus):
    assert parse_cpulist(cpulist(cpus)) == sorted(cpus)


def test_cpulist_rejects_garbage():
    with pytest.raises(ValueError):
        parse_cpulist("3-1")


# ------------------------------------------------------------------ corpus on disk
def test_captures_save_load_roundtrip(tmp_path):
    cap = captures("epyc-no-lspci")
    cap.save(tmp_path / "copy")
    back = Captures.load(tmp_path / "copy")
    assert back.files == cap.files and back.absent == cap.absent and back.commands == cap.commands
    assert not [p for p in (tmp_path / "copy").iterdir() if p.name.startswith(".")], "no temp files left"


def test_load_missing_dir_is_a_clear_error(tmp_path):
    with pytest.raises(CaptureError) as e:
        Captures.load(tmp_path / "nope")
    assert "facts --save" in e.value.fix


def test_load_bad_yaml_names_the_line(tmp_path):
    (tmp_path / "capture.yaml").write_text("source: x\nabsent: [unclosed\n")
    with pytest.raises(CaptureError) as e:
        Captures.load(tmp_path)
    assert e.value.where.endswith("capture.yaml:3") or e.value.where.endswith("capture.yaml:2")


def test_garbled_values_become_unknown_not_exceptions():
    d = parse_lspci_vvv(
        "0000:41:00.0 3D controller [0302]: NVIDIA Corporation GA100 [10de:20f1]\n\tNUMA node: ??\n\tIOMMU group: \n"
    )["0000:41:00.0"]
    assert d.numa_node is None and d.iommu_group is None and d.is_gpu
    nodes = parse_node_sysfs(
        "==> /sys/devices/system/node/node0/cpulist <==\n0-\n\n==> /sys/devices/system/node/node0/distance <==\n10 1x\n"
    )
    assert nodes[0].cpus == [] and nodes[0].distances == []
    cap = Captures(files={C.SYS_CPU: "==> /sys/devices/system/cpu/cpu0/topology/physical_package_id <==\n-\n"})
    assert parse_facts(cap).cpu.sockets is None


def test_lab_vm_real_capture_busybox_userland():
    cap = captures("lab-vm-4node-busybox")
    assert {C.LSPCI, C.NUMACTL, C.LSCPU} <= set(cap.absent)
    f = parse_facts(cap)
    assert [n.cpus for n in f.numa.nodes] == [[0], [1], [2], [3]]
    assert [n.distances for n in f.numa.nodes] == [
        [10, 16, 32, 32],
        [16, 10, 32, 32],
        [32, 32, 10, 16],
        [32, 32, 16, 10],
    ]
    assert f.numa.balancing == 1 and f.kernel.params["numa_balancing"] == "enable"
    assert (f.cpu.sockets, f.cpu.l3_count, f.cpu.sources["model"]) == (4, 4, "/proc/cpuinfo")
    assert f.kernel.release == "5.10.0-46-amd64"
    assert [n.address for n in f.pci.nics] == ["0000:00:02.0"] and f.pci.lspci_missing
