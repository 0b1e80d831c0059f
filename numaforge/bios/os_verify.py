"""BIOS intent vs what the OS sees (pure): abstract settings + host facts -> one verdict per setting.

A BMC saying "applied" is not proof. For each abstract setting (numaforge.bios.profile.SETTINGS_SCHEMA) this
module names the OS-visible consequence and checks it against numaforge.facts.HostFacts:

=====================  =====================================================================================
numa_nodes_per_socket  NUMA nodes with CPUs == NPS x sockets (NPS0: one node for the whole machine)
llc_as_numa            on: nodes == L3 domains (each node exactly one L3); off: fewer nodes than L3 domains
pcie_acs               off: ACSCtl SrcValid/ReqRedir/CmpltRedir clear on every bridge between a GPU and the NICs
                       that share its PCIe switch / root port; on: set on at least one of those bridges
pcie_aspm              LnkCtl ASPM state of the GPU and NIC links and the bridges above them == the setting
                       (limited to what each link's LnkCap supports)
iommu                  on: IOMMU groups exist (passthrough/translated per kernel cmdline reported); off: none
sriov                  on: every NIC offers VFs (sriov_totalvfs > 0); off: none does
memory_interleaving,   not visible from the OS: always "cannot tell", with why
determinism
=====================  =====================================================================================

Plus one row per GPU and NIC: its NUMA node equals the expected node (``expected_nodes`` from the inventory),
or without an expectation, the node of the root port above it and of the NIC/GPU sharing its switch.

Verdicts are ``ok``, ``mismatch`` or ``cannot tell`` -- the last always says why (tool missing, no root, the
setting leaves no trace in the OS...). Nothing here raises for missing data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..facts import HostFacts
from ..facts.pci import PciDevice, aspm_word

OK, MISMATCH, CANNOT = "ok", "mismatch", "cannot tell"
ORDER = [
    "numa_nodes_per_socket",
    "llc_as_numa",
    "memory_interleaving",
    "pcie_acs",
    "pcie_aspm",
    "iommu",
    "sriov",
    "determinism",
]


@dataclass
class Verdict:
    setting: str
    desired: Any
    verdict: str  # ok | mismatch | cannot tell
    evidence: str = ""  # what the OS shows
    why: str = ""  # for mismatch / cannot tell: the reason in plain words

    def as_dict(self, bmc_value: Any = None) -> dict:
        d = {
            "setting": self.setting,
            "desired": self.desired,
            "verdict": self.verdict,
            "os_evidence": self.evidence,
            "why": self.why,
        }
        if bmc_value is not None:
            d["bmc_value"] = bmc_value
        return d


def verify(
    settings: dict[str, Any], facts: HostFacts, expected_nodes: dict[str, int] | None = None, device_rows: bool = True
) -> list[Verdict]:
    """One Verdict per abstract setting in ``settings`` (known ones in a fixed order), then per GPU/NIC NUMA."""
    out: list[Verdict] = []
    names = [k for k in ORDER if k in settings] + [k for k in settings if k not in ORDER]
    for name in names:
        value = settings[name]
        if value is None:
            continue
        check = _CHECKS.get(name)
        if check is None:
            out.append(Verdict(name, value, CANNOT, "", "numaforge has no OS-side check for this setting"))
        elif isinstance(value, list):  # a preference list: the OS may show any of the values
            verdicts = [check(v, facts, settings) for v in value]
            out.append(next((v for v in verdicts if v.verdict == OK), verdicts[0]))
        else:
            out.append(check(value, facts, settings))
    if device_rows:
        out.extend(device_numa(facts, expected_nodes or {}))
    return out


def summary(verdicts: list[Verdict]) -> dict[str, int]:
    counts = {OK: 0, MISMATCH: 0, CANNOT: 0}
    for v in verdicts:
        counts[v.verdict] += 1
    return counts


# ------------------------------------------------------------------------------------------- NUMA / CPU
def _nodes(facts: HostFacts):
    nodes = facts.numa.cpu_nodes or facts.numa.nodes
    return nodes


def check_nps(value, facts: HostFacts, settings) -> Verdict:
    name = "numa_nodes_per_socket"
    if facts.numa.missing:
        return Verdict(name, value, CANNOT, "", f"no NUMA facts: {facts.numa.missing}")
    sockets = facts.cpu.sockets
    if sockets is None:
        return Verdict(name, value, CANNOT, "", f"socket count unknown: {facts.cpu.missing.get('sockets', '')}")
    nodes = len(_nodes(facts))
    evidence = f"{nodes} NUMA node(s) with CPUs on {sockets} socket(s)"
    if settings.get("llc_as_numa") is True:
        return Verdict(
            name,
            value,
            CANNOT,
            evidence,
            "llc_as_numa is on, so the nodes follow the L3 domains and NPS leaves no separate trace",
        )
    expected = 1 if value == 0 else value * sockets
    if nodes == expected:
        return Verdict(name, value, OK, evidence)
    why = f"NPS{value} on {sockets} socket(s) gives {expected} node(s); the OS sees {nodes}"
    if facts.cpu.l3_count and nodes == facts.cpu.l3_count and nodes != expected:
        why += f" -- one per L3 domain ({facts.cpu.l3_count}), as if LLC-as-NUMA were on"
    return Verdict(name, value, MISMATCH, evidence, why)


def check_llc(value, facts: HostFacts, settings) -> Verdict:
    name = "llc_as_numa"
    if facts.numa.missing:
        return Verdict(name, value, CANNOT, "", f"no NUMA facts: {facts.numa.missing}")
    if facts.cpu.l3_count is None:
        return Verdict(name, value, CANNOT, "", f"L3 domains unknown: {facts.cpu.missing.get('l3', '')}")
    nodes = _nodes(facts)
    l3 = facts.cpu.l3_count
    same_sets = None
    if facts.cpu.l3_domains is not None:
        same_sets = sorted(sorted(n.cpus) for n in nodes) == sorted(facts.cpu.l3_domains)
    evidence = f"{len(nodes)} NUMA node(s) with CPUs, {l3} L3 domain(s)"
    if same_sets:
        evidence += "; every node is exactly one L3 domain"
    looks_on = same_sets if same_sets is not None else len(nodes) == l3
    if value:
        if looks_on:
            return Verdict(name, value, OK, evidence)
        return Verdict(
            name,
            value,
            MISMATCH,
            evidence,
            f"LLC as NUMA gives one node per L3 domain ({l3}); the OS sees {len(nodes)} node(s)",
        )
    if not looks_on:
        return Verdict(name, value, OK, evidence)
    nps = settings.get("numa_nodes_per_socket")
    sockets = facts.cpu.sockets or 1
    nps_nodes = None if nps is None else (1 if nps == 0 else nps * sockets)
    if l3 <= sockets or nps_nodes == l3:
        return Verdict(
            name,
            value,
            CANNOT,
            evidence,
            "there are as many L3 domains as NPS gives nodes, so the layout is the same either way",
        )
    return Verdict(name, value, MISMATCH, evidence, f"every node is one L3 domain ({l3} nodes): LLC-as-NUMA looks on")


def check_not_visible(what: str):
    def check(value, facts, settings) -> Verdict:
        return Verdict(check.setting, value, CANNOT, "", what)  # type: ignore[attr-defined]  # set by @setting

    return check


# ------------------------------------------------------------------------------------------- PCI
def _lspci_unknown(facts: HostFacts, what: str) -> str | None:
    pci = facts.pci
    if pci.missing:
        return f"no PCI facts: {pci.missing}"
    if pci.lspci_missing:
        return f"{what} come only from `lspci -vvv`, which is missing: {pci.lspci_missing}"
    return None


def _denied(devs: list[PciDevice]) -> str | None:
    denied = [d.address for d in devs if d.caps_denied]
    if denied:
        return (
            f"lspci could not read the capabilities of {', '.join(denied[:4])}"
            f"{' ...' if len(denied) > 4 else ''} (not root): set ssh.sudo: true for this host"
        )
    return None


def gpu_nic_pairs(facts: HostFacts) -> list[tuple[str, str]]:
    """GPU/NIC pairs that share a PCIe switch or root port (where GPUDirect P2P can go direct)."""
    pci = facts.pci
    pairs = []
    for g in sorted(pci.gpus, key=lambda d: d.address):
        up_g = set(pci.bridges_above(g.address))
        for n in sorted(pci.nics, key=lambda d: d.address):
            if up_g & set(pci.bridges_above(n.address)):
                pairs.append((g.address, n.address))
    return pairs


def check_acs(value, facts: HostFacts, settings) -> Verdict:
    name = "pcie_acs"
    if why := _lspci_unknown(facts, "ACS control bits"):
        return Verdict(name, value, CANNOT, "", why)
    pci = facts.pci
    if not pci.gpus or not pci.nics:
        return Verdict(
            name,
            value,
            CANNOT,
            f"{len(pci.gpus)} GPU(s), {len(pci.nics)} NIC(s)",
            "ACS matters between GPUs and NICs; this host does not have both",
        )
    pairs = gpu_nic_pairs(facts)
    if not pairs:
        return Verdict(
            name,
            value,
            CANNOT,
            f"{len(pci.gpus)} GPU(s), {len(pci.nics)} NIC(s)",
            "no GPU shares a PCIe switch or root port with a NIC; their P2P traffic crosses the root "
            "complex, where ACS does not decide the path",
        )
    bridges: list[str] = []
    for g, n in pairs:
        for b in pci.bridges_between(g, n):
            if b not in bridges:
                bridges.append(b)
    devs = [pci.devices[b] for b in bridges if b in pci.devices]
    if why := _denied(devs):
        return Verdict(name, value, CANNOT, "", why)
    blocking = {d.address: d.acs_p2p_blocking() for d in devs if d.acs_p2p_blocking()}
    capable = [d for d in devs if d.acs_ctl is not None]
    evidence = (
        f"{len(bridges)} bridge(s) between {len(pairs)} GPU/NIC pair(s); "
        f"{len(capable)} with ACS; P2P bits set on {len(blocking)}"
    )
    if value is False:
        if not blocking:
            return Verdict(name, value, OK, evidence)
        detail = ", ".join(f"{a} ({' '.join(b + '+' for b in bits)})" for a, bits in blocking.items())
        return Verdict(
            name,
            value,
            MISMATCH,
            evidence,
            f"ACS still redirects peer-to-peer traffic on {detail}; GPUDirect RDMA needs these clear",
        )
    if blocking:
        return Verdict(name, value, OK, evidence)
    why = (
        "no bridge between the GPUs and NICs exposes an ACS capability"
        if not capable
        else "ACS is present but its P2P bits are clear on every bridge between GPUs and NICs"
    )
    return Verdict(name, value, MISMATCH, evidence, why)


_ASPM_WANT = {
    "disabled": frozenset(),
    "l0s": frozenset({"L0s"}),
    "l1": frozenset({"L1"}),
    "l0s_l1": frozenset({"L0s", "L1"}),
}


def check_aspm(value, facts: HostFacts, settings) -> Verdict:
    name = "pcie_aspm"
    if value not in _ASPM_WANT:
        return Verdict(name, value, CANNOT, "", f"unknown ASPM value {value!r}")
    if why := _lspci_unknown(facts, "ASPM link states"):
        return Verdict(name, value, CANNOT, "", why)
    pci = facts.pci
    addrs: list[str] = []
    for d in sorted(pci.gpus + pci.nics, key=lambda d: d.address):
        for a in pci.bridges_above(d.address) + [d.address]:
            if a not in addrs:
                addrs.append(a)
    scope = "GPU/NIC links and the bridges above them"
    if not addrs:
        addrs, scope = sorted(pci.devices), "all PCI devices"
    devs = [pci.devices[a] for a in addrs if a in pci.devices]
    if why := _denied(devs):
        return Verdict(name, value, CANNOT, "", why)
    links = [d for d in devs if d.aspm_enabled is not None]
    if not links:
        return Verdict(
            name,
            value,
            CANNOT,
            f"{len(devs)} device(s), none with a PCIe link control register",
            "no PCI Express links to look at (lspci shows no LnkCtl)",
        )
    want = _ASPM_WANT[value]
    wrong = []
    for d in links:
        expect = want if d.aspm_supported is None else want & d.aspm_supported
        if d.aspm_enabled != expect:
            wrong.append(f"{d.address} {aspm_word(d.aspm_enabled)} (want {aspm_word(expect)})")
    evidence = f"{len(links)} link(s) checked ({scope}); {len(wrong)} differ"
    degraded = [d.address for d in links if d.link_degraded and (d.is_gpu or d.is_nic)]
    if degraded:
        evidence += f"; link trained below capability: {', '.join(degraded)}"
    if not wrong:
        return Verdict(name, value, OK, evidence)
    why = "LnkCtl shows " + ", ".join(wrong[:6]) + (" ..." if len(wrong) > 6 else "")
    pol = facts.kernel.params
    if "pcie_aspm" in pol or "pcie_aspm.policy" in pol:
        why += (
            f"; note the kernel command line sets pcie_aspm={pol.get('pcie_aspm')}"
            f" pcie_aspm.policy={pol.get('pcie_aspm.policy')}, which also changes ASPM"
        )
    return Verdict(name, value, MISMATCH, evidence, why)


def check_iommu(value, facts: HostFacts, settings) -> Verdict:
    name = "iommu"
    io = facts.iommu
    if io.groups is None:
        return Verdict(name, value, CANNOT, "", f"IOMMU groups unknown: {io.missing}")
    evidence = f"{io.groups} IOMMU group(s); kernel IOMMU mode: {io.mode}" + (
        f" ({io.cmdline_evidence})" if io.cmdline_evidence else ""
    )
    if value:
        if io.groups > 0:
            return Verdict(name, value, OK, evidence)
        if io.mode == "off":
            return Verdict(
                name,
                value,
                CANNOT,
                evidence,
                f"the kernel command line turns the IOMMU off ({io.cmdline_evidence}), so the OS cannot "
                "show whether the BIOS enabled it",
            )
        return Verdict(name, value, MISMATCH, evidence, "no IOMMU groups: the OS sees no active IOMMU")
    if io.groups == 0:
        return Verdict(name, value, OK, evidence)
    return Verdict(name, value, MISMATCH, evidence, f"{io.groups} IOMMU groups exist: an IOMMU is active")


def check_sriov(value, facts: HostFacts, settings) -> Verdict:
    name = "sriov"
    pci = facts.pci
    if pci.missing:
        return Verdict(name, value, CANNOT, "", f"no PCI facts: {pci.missing}")
    nics = sorted(pci.nics, key=lambda d: d.address)
    if not nics:
        return Verdict(name, value, CANNOT, "no NICs found", "SR-IOV is checked on the NICs; this host has none")
    have_sysfs = "sysfs" in pci.sources
    vfs: dict[str, int | None] = {}
    for n in nics:
        if n.sriov_total_vfs is not None:
            vfs[n.address] = n.sriov_total_vfs
        elif have_sysfs:
            vfs[n.address] = 0  # no sriov_totalvfs file: no SR-IOV capability exposed
        elif n.caps_denied:
            vfs[n.address] = None
        else:
            vfs[n.address] = 0
    unknown = [a for a, v in vfs.items() if v is None]
    if unknown:
        return Verdict(name, value, CANNOT, "", _denied([pci.devices[a] for a in unknown]) or "VF counts unknown")
    evidence = ", ".join(f"{a}: {v} VFs" for a, v in vfs.items())
    without = [a for a, v in vfs.items() if not v]
    if value:
        if not without:
            return Verdict(name, value, OK, evidence)
        return Verdict(
            name,
            value,
            MISMATCH,
            evidence,
            f"{', '.join(without)} offer(s) no virtual functions (sriov_totalvfs is 0 or missing)",
        )
    if len(without) == len(vfs):
        return Verdict(name, value, OK, evidence)
    return Verdict(name, value, MISMATCH, evidence, "NICs still offer virtual functions")


_CHECKS = {
    "numa_nodes_per_socket": check_nps,
    "llc_as_numa": check_llc,
    "pcie_acs": check_acs,
    "pcie_aspm": check_aspm,
    "iommu": check_iommu,
    "sriov": check_sriov,
}
for _name, _why in (
    (
        "memory_interleaving",
        "memory interleaving across channels/dies leaves no trace the OS can "
        "read (node count and distances look the same); check it on the BMC",
    ),
    (
        "determinism",
        "the determinism slider changes boost/power behaviour, which the OS does not list; check it on the BMC",
    ),
):
    _c = check_not_visible(_why)
    _c.setting = _name
    _CHECKS[_name] = _c


# ------------------------------------------------------------------------------------------- device NUMA
def device_numa(facts: HostFacts, expected: dict[str, int]) -> list[Verdict]:
    """One row per GPU and NIC: is it on the expected NUMA node?"""
    pci = facts.pci
    if pci.missing:
        return [
            Verdict(f"numa_node {a}", n, CANNOT, "", f"no PCI facts: {pci.missing}")
            for a, n in sorted(expected.items())
        ]
    out = [
        Verdict(
            f"numa_node {a}",
            expected[a],
            MISMATCH,
            "device not found",
            f"the inventory expects a device at {a}; the OS does not list it",
        )
        for a in sorted(expected)
        if a not in pci.devices
    ]
    partners: dict[str, list[str]] = {}
    for g, n in gpu_nic_pairs(facts):
        partners.setdefault(g, []).append(n)
        partners.setdefault(n, []).append(g)
    for d in sorted(pci.gpus + pci.nics, key=lambda d: d.address):
        if d.address in expected:
            out.append(_expected_node(d, expected[d.address]))
        else:
            out.append(_topology_node(facts, d, partners.get(d.address, [])))
    return out


def _expected_node(d, want: int) -> Verdict:
    """A device whose node the inventory names."""
    label = f"numa_node {d.address} ({d.kind})"
    node = d.numa_node
    if node is None:
        why = "the device's NUMA node is unknown (no sysfs numa_node, and lspci printed no NUMA node line)"
        return Verdict(label, want, CANNOT, "", why)
    if node == want:
        return Verdict(label, want, OK, f"node {node}")
    return Verdict(
        label, want, MISMATCH, f"node {node}", f"the inventory expects node {want}; the firmware reports {node}"
    )


def _topology_node(facts: HostFacts, d, partners: list[str]) -> Verdict:
    """A device with no expected node: on the node of its root port and of its GPU/NIC partners?"""
    pci = facts.pci
    label = f"numa_node {d.address} ({d.kind})"
    node = d.numa_node
    want_txt = "the node of its root port and of its GPU/NIC partner"
    if facts.numa.missing:
        return Verdict(label, want_txt, CANNOT, "", f"no NUMA facts: {facts.numa.missing}")
    if len(facts.numa.nodes) <= 1:
        return Verdict(label, "node 0", OK, f"node {node}; the host has one NUMA node")
    if node is None:
        return Verdict(label, want_txt, CANNOT, "", "the device's NUMA node is unknown")
    if node < 0:
        why = "the firmware gives this device no NUMA affinity on a multi-node host (ACPI _PXM)"
        return Verdict(label, want_txt, MISMATCH, "numa_node -1", why)
    problems = []
    above = [pci.devices[b] for b in pci.bridges_above(d.address) if b in pci.devices]
    root = next((b for b in above if b.numa_node is not None and b.numa_node >= 0), None)
    if root is not None and root.numa_node != node:
        problems.append(f"the root port {root.address} above it is on node {root.numa_node}")
    for p in partners:
        pn = pci.devices[p].numa_node
        if pn is not None and pn >= 0 and pn != node:
            problems.append(f"its partner {pci.devices[p].kind.upper()} {p} behind the same switch is on node {pn}")
    if problems:
        return Verdict(label, want_txt, MISMATCH, f"node {node}", "; ".join(problems))
    return Verdict(label, want_txt, OK, f"node {node}")
