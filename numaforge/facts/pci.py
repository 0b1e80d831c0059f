"""PCI facts: devices, GPUs and NICs, their NUMA node, the bridges above them, ACS, ASPM, link state, SR-IOV.

Sources: ``lspci -vvv -D -nn`` (capabilities need root: without it lspci prints ``Capabilities: <access
denied>`` and ACS/ASPM become unknown), the PCI sysfs attributes (``head -v /sys/bus/pci/devices/*/{class,
vendor,device,numa_node,sriov_totalvfs}``) and ``ls -l /sys/bus/pci/devices/`` whose symlink targets give the
bridge chain above every device. Each source alone gives part of the picture; all parsers are pure.

lspci formats handled (pciutils 3.7 - 3.10)::

    0000:41:00.0 3D controller [0302]: NVIDIA Corporation GA100 [A100 PCIe 40GB] [10de:20f1] (rev a1)
        Physical Slot: 3
        NUMA node: 1
        IOMMU group: 40
        Bus: primary=40, secondary=41, subordinate=41, sec-latency=0        (bridges)
        Capabilities: [58] Express (v2) Root Port (Slot+), MSI 00
            LnkCap: Port #0, Speed 16GT/s, Width x16, ASPM L0s L1, Exit Latency ...
            LnkCtl: ASPM Disabled; RCB 64 bytes, ...          (or "ASPM L1 Enabled;", "ASPM L0s L1 Enabled;")
            LnkSta: Speed 16GT/s (ok), Width x16 (ok)        (older: "Speed 8GT/s, Width x16, TrErr- ...")
        Capabilities: [2a0 v1] Access Control Services
            ACSCap: SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+
            ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
        Capabilities: [180 v1] Single Root I/O Virtualization (SR-IOV)
            Initial VFs: 8, Total VFs: 8, Number of VFs: 0, ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .captures import LSPCI, PCI_LINKS, SYS_PCI, Captures, parse_head, try_int

GPU_VENDORS = {"10de": "NVIDIA", "1002": "AMD"}
BRIDGE_CLASS = "0604"
ACS_P2P_BITS = ("SrcValid", "ReqRedir", "CmpltRedir")  # must be clear for direct GPU<->NIC peer-to-peer


@dataclass
class PciDevice:
    address: str  # 0000:41:00.0
    class_code: str | None = None  # 0302
    class_name: str = ""
    vendor: str | None = None  # 10de
    device: str | None = None  # 20f1
    name: str = ""
    physical_slot: str | None = None
    numa_node: int | None = None  # -1 = the firmware gave no affinity; None = unknown
    iommu_group: int | None = None
    driver: str | None = None
    secondary_bus: int | None = None  # bridges: the bus range they forward
    subordinate_bus: int | None = None
    express_type: str | None = None  # Root Port, Downstream Port, Upstream Port, Endpoint, ...
    caps_denied: bool = False  # lspci ran without root: capabilities unknown
    aspm_supported: frozenset | None = None  # from LnkCap: {"L0s", "L1"}; empty = not supported
    aspm_enabled: frozenset | None = None  # from LnkCtl
    link_speed: str | None = None  # LnkSta, e.g. "16GT/s"
    link_width: int | None = None
    link_cap_speed: str | None = None
    link_cap_width: int | None = None
    link_degraded: bool = False  # "(downgraded)" on speed or width
    acs_cap: dict[str, bool] | None = None
    acs_ctl: dict[str, bool] | None = None
    sriov_total_vfs: int | None = None
    parent: str | None = None  # the bridge directly above (address), None at a root bus
    sources: set = field(default_factory=set)

    @property
    def is_bridge(self) -> bool:
        return self.class_code == BRIDGE_CLASS

    @property
    def is_vf(self) -> bool:
        return "virtual function" in self.name.lower()

    @property
    def is_gpu(self) -> bool:
        if self.class_code is None:
            return False
        if self.class_code == "0302":
            return True
        return self.class_code in ("0300", "0380") and (self.vendor or "") in GPU_VENDORS

    @property
    def is_nic(self) -> bool:
        return self.class_code in ("0200", "0207") and not self.is_vf

    @property
    def kind(self) -> str:
        return "gpu" if self.is_gpu else "nic" if self.is_nic else "bridge" if self.is_bridge else "other"

    def acs_p2p_blocking(self) -> list[str]:
        """ACS control bits set that redirect/validate peer-to-peer traffic (empty = P2P goes direct)."""
        return [b for b in ACS_P2P_BITS if (self.acs_ctl or {}).get(b)]

    def as_dict(self) -> dict:
        d = {
            "address": self.address,
            "kind": self.kind,
            "class": self.class_code,
            "vendor": self.vendor,
            "device": self.device,
            "name": self.name,
            "numa_node": self.numa_node,
        }
        for k in (
            "physical_slot",
            "iommu_group",
            "driver",
            "express_type",
            "link_speed",
            "link_width",
            "link_cap_speed",
            "link_cap_width",
            "sriov_total_vfs",
            "parent",
        ):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        if self.link_degraded:
            d["link_degraded"] = True
        if self.aspm_enabled is not None:
            d["aspm"] = aspm_word(self.aspm_enabled)
        if self.acs_ctl is not None:
            d["acs_ctl"] = " ".join(f"{k}{'+' if v else '-'}" for k, v in self.acs_ctl.items())
        if self.caps_denied:
            d["caps_denied"] = True
        return d


def aspm_word(states) -> str:
    s = set(states)
    return "disabled" if not s else "l0s_l1" if s == {"L0s", "L1"} else s.pop().lower()


@dataclass
class PciFacts:
    devices: dict[str, PciDevice] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    missing: str | None = None  # no PCI facts at all, and why
    lspci_missing: str | None = None  # lspci output unavailable, and why (ACS/ASPM/link unknown)

    @property
    def gpus(self) -> list[PciDevice]:
        return [d for d in self.devices.values() if d.is_gpu]

    @property
    def nics(self) -> list[PciDevice]:
        return [d for d in self.devices.values() if d.is_nic]

    @property
    def caps_denied(self) -> bool:
        return any(d.caps_denied for d in self.devices.values())

    def bridges_above(self, address: str) -> list[str]:
        """Bridge addresses from the root down to the device's parent."""
        chain, seen = [], set()
        cur = self.devices.get(address)
        while cur is not None and cur.parent and cur.parent not in seen:
            seen.add(cur.parent)
            chain.append(cur.parent)
            cur = self.devices.get(cur.parent)
        return list(reversed(chain))

    def bridges_between(self, a: str, b: str) -> list[str]:
        """Bridges on the path between two devices: above either one but not above both.

        Two devices behind one PCIe switch -> the two switch downstream ports; under different root ports ->
        every bridge on both chains. These are where ACS would redirect peer-to-peer traffic.
        """
        up_a, up_b = self.bridges_above(a), self.bridges_above(b)
        return [x for x in up_a if x not in up_b] + [x for x in up_b if x not in up_a]

    def as_dict(self) -> dict:
        if self.missing:
            return {"missing": self.missing}
        d = {
            "sources": self.sources,
            "gpus": [g.address for g in self.gpus],
            "nics": [n.address for n in self.nics],
            "devices": {a: dev.as_dict() for a, dev in sorted(self.devices.items())},
        }
        if self.lspci_missing:
            d["lspci_missing"] = self.lspci_missing
        return d


# ----------------------------------------------------------------------------------------- lspci -vvv
_ADDR = r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]"
_HEADER = re.compile(rf"^({_ADDR}) (.+?)(?: \[([0-9a-f]{{4}})\])?: (.*)$")
_IDS = re.compile(r"^(.*) \[([0-9a-f]{4}):([0-9a-f]{4})\](.*)$")
_EXPRESS = re.compile(r"^Capabilities: \[[0-9a-f]+\] Express \(v\d\) (.+?)(?: \(Slot[+-]\))?, (?:MSI|IntMsgNum)")
_BUS = re.compile(r"^Bus: primary=([0-9a-f]{2}), secondary=([0-9a-f]{2}), subordinate=([0-9a-f]{2})")
_LNKCAP = re.compile(
    r"^LnkCap:\s+Port #\d+, Speed ([\d.]+GT/s|unknown)[^,]*, Width x(\d+), ASPM (not supported|L0s L1|L0s|L1|unknown)"
)
_LNKCTL = re.compile(r"^LnkCtl:\s+ASPM (Disabled|L0s L1 Enabled|L0s Enabled|L1 Enabled)")
_LNKSTA = re.compile(
    r"^LnkSta:\s+Speed ([\d.]+GT/s|unknown)( \((?:ok|downgraded)\))?, Width x(\d+)( \((?:ok|downgraded)\))?"
)
_SRIOV = re.compile(r"Total VFs: (\d+)")
_FLAG = re.compile(r"([A-Za-z]+)([+-])")


def _flags(text: str) -> dict[str, bool]:
    return {m.group(1): m.group(2) == "+" for m in _FLAG.finditer(text)}


def _aspm_set(word: str) -> frozenset:
    return frozenset(x for x in word.replace("Enabled", "").split() if x in ("L0s", "L1"))


def parse_lspci_vvv(text: str | None) -> dict[str, PciDevice]:
    """`lspci -vvv -D -nn` -> {address: PciDevice}. Lines lspci adds in newer versions are ignored."""
    devices: dict[str, PciDevice] = {}
    dev: PciDevice | None = None
    in_acs = False
    for raw in (text or "").splitlines():
        if not raw.strip():
            continue
        if not raw[0].isspace():
            m = _HEADER.match(raw)
            dev = None
            if m:
                dev = PciDevice(m.group(1), class_code=m.group(3), class_name=m.group(2), sources={"lspci"})
                ids = _IDS.match(m.group(4))
                if ids:
                    dev.name, dev.vendor, dev.device = ids.group(1), ids.group(2), ids.group(3)
                else:
                    dev.name = m.group(4)
                devices[dev.address] = dev
            in_acs = False
            continue
        if dev is None:
            continue
        line = raw.strip()
        if line.startswith("Capabilities:"):
            in_acs = "Access Control Services" in line
            if "<access denied>" in line:
                dev.caps_denied = True
            elif m := _EXPRESS.match(line):
                dev.express_type = m.group(1)
            continue
        if line.startswith("Physical Slot:"):
            dev.physical_slot = line.split(":", 1)[1].strip()
        elif line.startswith("NUMA node:"):
            dev.numa_node = try_int(line.split(":", 1)[1])
        elif line.startswith("IOMMU group:"):
            dev.iommu_group = try_int(line.split(":", 1)[1])
        elif line.startswith("Kernel driver in use:"):
            dev.driver = line.split(":", 1)[1].strip()
        elif m := _BUS.match(line):
            dev.secondary_bus, dev.subordinate_bus = int(m.group(2), 16), int(m.group(3), 16)
        elif m := _LNKCAP.match(line):
            dev.link_cap_speed = m.group(1)
            dev.link_cap_width = int(m.group(2))
            dev.aspm_supported = frozenset() if m.group(3) in ("not supported", "unknown") else _aspm_set(m.group(3))
        elif m := _LNKCTL.match(line):
            dev.aspm_enabled = _aspm_set(m.group(1))
        elif m := _LNKSTA.match(line):
            dev.link_speed, dev.link_width = m.group(1), int(m.group(3))
            dev.link_degraded = "downgraded" in (m.group(2) or "") + (m.group(4) or "")
        elif in_acs and line.startswith("ACSCap:"):
            dev.acs_cap = _flags(line.split(":", 1)[1])
        elif in_acs and line.startswith("ACSCtl:"):
            dev.acs_ctl = _flags(line.split(":", 1)[1])
        elif m := _SRIOV.search(line):
            if line.startswith("Initial VFs:"):
                dev.sriov_total_vfs = int(m.group(1))
    # lspci alone: a device's parent is the bridge whose secondary bus is the device's bus
    by_secondary = {(a[:4], d.secondary_bus): a for a, d in devices.items() if d.secondary_bus is not None}
    for a, d in devices.items():
        d.parent = by_secondary.get((a[:4], int(a[5:7], 16)))
    return devices


# ----------------------------------------------------------------------------------------- sysfs
_SYS_ATTR = re.compile(rf"^/sys/bus/pci/devices/({_ADDR})/(class|vendor|device|numa_node|sriov_totalvfs)$")
_LINK = re.compile(rf"({_ADDR}) -> (\S+)$")


def parse_pci_sysfs(head_text: str | None) -> dict[str, dict[str, str]]:
    """`head -v /sys/bus/pci/devices/*/{class,vendor,...}` -> {address: {attr: value}}."""
    out: dict[str, dict[str, str]] = {}
    for path, content in parse_head(head_text).items():
        if m := _SYS_ATTR.match(path):
            out.setdefault(m.group(1), {})[m.group(2)] = content.strip()
    return out


def parse_pci_links(ls_text: str | None) -> dict[str, list[str]]:
    """`ls -l /sys/bus/pci/devices/` -> {address: [bridge addresses from the root down to the parent]}.

    Each entry is a symlink like ``0000:41:00.0 -> ../../../devices/pci0000:40/0000:40:01.1/0000:41:00.0``.
    """
    out: dict[str, list[str]] = {}
    for line in (ls_text or "").splitlines():
        if m := _LINK.search(line.strip()):
            chain = [p for p in m.group(2).split("/") if re.fullmatch(_ADDR, p)]
            if chain and chain[-1] == m.group(1):
                out[m.group(1)] = chain[:-1]
    return out


def _hex(v: str | None) -> str | None:
    if not v:
        return None
    return v.lower().removeprefix("0x")


def pci_facts(cap: Captures) -> PciFacts:
    lspci_text, sys_text, links_text = cap.get(LSPCI), cap.get(SYS_PCI), cap.get(PCI_LINKS)
    facts = PciFacts()
    if lspci_text is None:
        facts.lspci_missing = cap.why(LSPCI)
    if lspci_text is None and sys_text is None and links_text is None:
        facts.missing = f"lspci: {cap.why(LSPCI)}; PCI sysfs: {cap.why(SYS_PCI)}"
        return facts
    devices = parse_lspci_vvv(lspci_text)
    if lspci_text is not None:
        facts.sources.append("lspci -vvv")
    sysfs = parse_pci_sysfs(sys_text)
    if sysfs:
        facts.sources.append("sysfs")
    for addr, attrs in sysfs.items():
        dev = devices.setdefault(addr, PciDevice(addr))
        dev.sources.add("sysfs")
        if (cls := _hex(attrs.get("class"))) and len(cls) >= 4:
            dev.class_code = cls[:4]
        dev.vendor = dev.vendor or _hex(attrs.get("vendor"))
        dev.device = dev.device or _hex(attrs.get("device"))
        if re.fullmatch(r"-?\d+", attrs.get("numa_node", "")):
            dev.numa_node = int(attrs["numa_node"])  # sysfs is authoritative (lspci omits it on 1-node hosts)
        if attrs.get("sriov_totalvfs", "").isdigit():
            dev.sriov_total_vfs = int(attrs["sriov_totalvfs"])
    links = parse_pci_links(links_text)
    if links:
        facts.sources.append("sysfs links")
    for addr, chain in links.items():
        dev = devices.setdefault(addr, PciDevice(addr))
        dev.parent = chain[-1] if chain else None
    facts.devices = devices
    return facts
