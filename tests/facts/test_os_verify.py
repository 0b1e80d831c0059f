"""OS-side BIOS verdicts on the corpus: each EPYC fixture carries one documented deviation (its capture.yaml
notes say which), and the verdict table must name exactly that deviation."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from numaforge.bios.os_verify import CANNOT, MISMATCH, OK, summary, verify
from numaforge.bios.profile import SETTINGS_SCHEMA
from numaforge.facts import Captures, parse_facts
from numaforge.facts import captures as C

from .helpers import GPUDIRECT, MACHINES, captures, facts

NOT_VISIBLE = {"memory_interleaving", "determinism"}


def table(machine, settings=GPUDIRECT, expected=None):
    return {v.setting: v for v in verify(settings, facts(machine), expected)}


def test_same_setting_names_as_the_bios_profiles():
    assert set(GPUDIRECT) == set(SETTINGS_SCHEMA)


def test_intended_layout_is_all_ok():
    t = table("epyc-7763-2s-nps1-4gpu")
    for name, v in t.items():
        want = CANNOT if name in NOT_VISIBLE else OK
        assert v.verdict == want, (name, v)
    assert all(t[n].why for n in NOT_VISIBLE)
    assert len([n for n in t if n.startswith("numa_node ")]) == 8  # 4 GPUs + 4 NICs


def test_nps4_left_on_and_acs_still_enabled():
    t = table("epyc-nps4-acs-enabled")
    assert t["numa_nodes_per_socket"].verdict == MISMATCH
    assert "gives 2 node(s); the OS sees 8" in t["numa_nodes_per_socket"].why
    acs = t["pcie_acs"]
    assert acs.verdict == MISMATCH and "0000:42:00.0 (SrcValid+ ReqRedir+ CmpltRedir+)" in acs.why
    assert "0000:40:01.1" not in acs.why, "root ports are not between a GPU and its switch-mate NIC"
    assert t["llc_as_numa"].verdict == OK and t["pcie_aspm"].verdict == OK
    assert all(v.verdict == OK for n, v in t.items() if n.startswith("numa_node "))
    assert (
        table("epyc-nps4-acs-enabled", {**GPUDIRECT, "numa_nodes_per_socket": 4})["numa_nodes_per_socket"].verdict == OK
    )
    assert table("epyc-nps4-acs-enabled", {"pcie_acs": True})["pcie_acs"].verdict == OK


def test_acs_wanted_on_but_off():
    v = table("epyc-7763-2s-nps1-4gpu", {"pcie_acs": True})["pcie_acs"]
    assert v.verdict == MISMATCH and "P2P bits are clear" in v.why


def test_llc_as_numa():
    t = table("epyc-llc-as-numa")
    assert t["llc_as_numa"].verdict == MISMATCH and "LLC-as-NUMA looks on" in t["llc_as_numa"].why
    assert "one per L3 domain (16)" in t["numa_nodes_per_socket"].why
    on = table("epyc-llc-as-numa", {**GPUDIRECT, "llc_as_numa": True})
    assert on["llc_as_numa"].verdict == OK
    assert on["numa_nodes_per_socket"].verdict == CANNOT and "follow the L3 domains" in on["numa_nodes_per_socket"].why
    assert table("epyc-7763-2s-nps1-4gpu", {"llc_as_numa": True})["llc_as_numa"].verdict == MISMATCH


def test_gpu_on_the_wrong_node():
    t = table("epyc-gpu-wrong-node")
    gpu = t["numa_node 0000:c3:00.0 (gpu)"]
    assert gpu.verdict == MISMATCH and gpu.evidence == "node 0"
    assert "root port 0000:c0:01.1 above it is on node 1" in gpu.why
    assert t["numa_node 0000:c4:00.0 (nic)"].verdict == MISMATCH  # its partner cannot both be right
    assert t["numa_node 0000:43:00.0 (gpu)"].verdict == OK
    others = {n: v.verdict for n, v in t.items() if not n.startswith("numa_node ") and n not in NOT_VISIBLE}
    assert set(others.values()) == {OK}


def test_expected_nodes_from_the_inventory():
    t = table("epyc-gpu-wrong-node", {}, {"0000:c3:00.0": 1, "0000:43:00.0": 0, "0000:99:00.0": 0})
    assert t["numa_node 0000:c3:00.0 (gpu)"].verdict == MISMATCH
    assert "expects node 1; the firmware reports 0" in t["numa_node 0000:c3:00.0 (gpu)"].why
    assert t["numa_node 0000:43:00.0 (gpu)"].verdict == OK
    assert t["numa_node 0000:99:00.0"].verdict == MISMATCH and "does not list it" in t["numa_node 0000:99:00.0"].why


def test_aspm_differs():
    t = table("epyc-aspm-l1-on-nics")
    v = t["pcie_aspm"]
    assert v.verdict == MISMATCH and "0000:44:00.0 l1 (want disabled)" in v.why
    assert "0000:43:00.0" not in v.why and "link trained below capability: 0000:63:00.0" in v.evidence
    # wanting L1 everywhere: GPUs cannot do ASPM (LnkCap "not supported"), so only the L1-capable links count
    l1 = table("epyc-aspm-l1-on-nics", {"pcie_aspm": "l1"})["pcie_aspm"]
    assert l1.verdict == MISMATCH and "0000:43:00.0" not in l1.why and "0000:40:01.1 disabled (want l1)" in l1.why


def test_lspci_missing_means_cannot_tell_with_the_reason():
    t = table("epyc-no-lspci")
    for name in ("pcie_acs", "pcie_aspm"):
        assert t[name].verdict == CANNOT and "lspci is not installed" in t[name].why and "pciutils" in t[name].why
    assert t["numa_nodes_per_socket"].verdict == OK and t["sriov"].verdict == OK  # sysfs still answers
    assert t["numa_node 0000:c3:00.0 (gpu)"].verdict == OK


def test_iommu_and_sriov_off():
    t = table("epyc-iommu-off-no-sriov")
    assert t["iommu"].verdict == MISMATCH and "no IOMMU groups" in t["iommu"].why
    assert t["sriov"].verdict == MISMATCH and "0000:44:00.0" in t["sriov"].why
    off = table("epyc-iommu-off-no-sriov", {"iommu": False, "sriov": False})
    assert off["iommu"].verdict == OK and off["sriov"].verdict == OK
    assert table("epyc-7763-2s-nps1-4gpu", {"iommu": False})["iommu"].verdict == MISMATCH


def test_iommu_off_on_the_kernel_cmdline_cannot_prove_the_bios():
    cap = captures("epyc-iommu-off-no-sriov")
    cap.files[C.PROC_KERNEL] = cap.files[C.PROC_KERNEL].replace("ro quiet", "ro quiet amd_iommu=off")
    [v] = verify({"iommu": True}, parse_facts(cap), device_rows=False)
    assert v.verdict == CANNOT and "amd_iommu=off" in v.why


def test_unprivileged_lspci_asks_for_sudo():
    t = table("this-build-server-unprivileged", {"pcie_aspm": "disabled", "sriov": True})
    assert t["pcie_aspm"].verdict == CANNOT and "ssh.sudo: true" in t["pcie_aspm"].why


def test_build_server_real_capture_verdicts():
    t = table("this-build-server")
    assert t["numa_nodes_per_socket"].verdict == OK
    assert t["pcie_acs"].verdict == CANNOT and "does not have both" in t["pcie_acs"].why
    assert t["iommu"].verdict == MISMATCH  # a VM without a virtual IOMMU
    assert t["numa_node 0000:00:03.0 (nic)"].verdict == OK  # one node: nothing can be misplaced


def test_unknown_setting_is_cannot_tell():
    [v] = verify({"turbo_frobnicator": 1}, facts("this-build-server"), device_rows=False)
    assert v.verdict == CANNOT and "no OS-side check" in v.why


def test_nothing_captured_at_all_never_crashes():
    empty = parse_facts(
        Captures(source="h", absent={C.LSPCI: "lspci is not installed", C.SYS_NODE: "NUMA node sysfs is not there"})
    )
    vs = verify(GPUDIRECT, empty, {"0000:41:00.0": 1})
    assert {v.verdict for v in vs} == {CANNOT}
    assert all(v.why for v in vs)
    assert "NUMA node sysfs is not there" in {v.setting: v for v in vs}["numa_nodes_per_socket"].why
    assert summary(vs) == {OK: 0, MISMATCH: 0, CANNOT: len(vs)}


@settings(max_examples=60, deadline=None)
@given(
    machine=st.sampled_from(MACHINES),
    drop=st.sets(
        st.sampled_from(
            sorted(
                {
                    C.LSPCI,
                    C.NUMACTL,
                    C.LSCPU,
                    C.CPUINFO,
                    C.UNAME,
                    C.SYS_NODE,
                    C.SYS_CPU,
                    C.SYS_PCI,
                    C.PCI_LINKS,
                    C.IOMMU_GROUPS,
                    C.PROC_KERNEL,
                }
            )
        )
    ),
)
def test_any_missing_capture_gives_reasons_not_crashes(machine, drop):
    cap = copy.deepcopy(_cached(machine))
    for name in drop:
        cap.files.pop(name, None)
        cap.absent[name] = f"dropped {name} for the test"
    vs = verify(GPUDIRECT, parse_facts(cap))
    for v in vs:
        assert v.verdict in (OK, MISMATCH, CANNOT)
        if v.verdict != OK:
            assert v.why, v


_CACHE: dict = {}


def _cached(machine):
    if machine not in _CACHE:
        _CACHE[machine] = captures(machine)
    return _CACHE[machine]


@settings(max_examples=80, deadline=None)
@given(machine=st.sampled_from(MACHINES), data=st.data())
def test_garbled_captures_never_crash(machine, data):
    """A capture cut short or with a garbled line (a flaky serial console, a full disk) gives facts with gaps,
    never an exception."""
    cap = copy.deepcopy(_cached(machine))
    name = data.draw(st.sampled_from(sorted(cap.files)))
    lines = cap.files[name].splitlines()
    if lines:
        i = data.draw(st.integers(0, len(lines) - 1))
        if data.draw(st.booleans()):
            lines = lines[:i]
        else:
            keep = data.draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:keep] + data.draw(st.text(alphabet=" :-+x,=0123456789abcdef[]()#<>", max_size=12))
    cap.files[name] = "\n".join(lines)
    for v in verify(GPUDIRECT, parse_facts(cap)):
        assert v.verdict in (OK, MISMATCH, CANNOT)


def test_lab_vm_real_capture_verdicts():
    t = table(
        "lab-vm-4node-busybox",
        {
            "numa_nodes_per_socket": 1,
            "llc_as_numa": False,
            "pcie_acs": False,
            "pcie_aspm": "disabled",
            "iommu": False,
            "sriov": True,
        },
    )
    assert t["numa_nodes_per_socket"].verdict == OK and t["iommu"].verdict == OK
    assert t["llc_as_numa"].verdict == CANNOT and "same either way" in t["llc_as_numa"].why
    assert t["pcie_acs"].verdict == CANNOT and "lspci is not installed" in t["pcie_acs"].why
    assert t["sriov"].verdict == MISMATCH  # a virtio NIC has no SR-IOV
    assert table("lab-vm-4node-busybox", {"numa_nodes_per_socket": 4})["numa_nodes_per_socket"].verdict == MISMATCH


def test_preference_list_is_ok_when_the_os_shows_any_of_its_values():
    # the intended layout has ASPM disabled: [l1, disabled] is ok through its second value (the platform took it)
    ok = table("epyc-7763-2s-nps1-4gpu", {"pcie_aspm": ["l1", "disabled"]})["pcie_aspm"]
    assert ok.verdict == OK and ok.desired == "disabled"
    # L1 left on the NICs: neither value holds everywhere, the first value's verdict is reported
    bad = table("epyc-aspm-l1-on-nics", {"pcie_aspm": ["l1", "disabled"]})["pcie_aspm"]
    assert bad.verdict == MISMATCH and bad.desired == "l1" and "(want l1)" in bad.why
