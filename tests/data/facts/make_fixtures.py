"""Writes the EPYC + GPU fixture captures in this directory (run: .venv/bin/python tests/data/facts/make_fixtures.py).

These machines are not captured from real hardware: they are written in exactly the shape the real commands
print (compare this-build-server/, a real capture), following public documentation:

- AMD EPYC 7003 (Milan) tuning guides: 8 CCDs x 1 CCX (8 cores, 32 MB L3 each) per 64-core socket; NPS1 gives
  one NUMA node per socket, NPS4 four (one per quadrant); "LLC as NUMA node" gives one node per L3; node
  distances 10 local / 12 same socket / 32 other socket; root complexes 00/20/40/60 on socket 0, 80/a0/c0/e0
  on socket 1.
- NVIDIA GPUDirect RDMA docs: GPU and NIC behind one PCIe switch; ACS must be off on the switch ports between
  them (ACSCtl SrcValid-/ReqRedir-/CmpltRedir-), otherwise P2P traffic is redirected to the root complex.
- pciutils output format: `lspci -vvv -D -nn` header, "Physical Slot:", "NUMA node:", "IOMMU group:",
  "Bus: primary=..", Express LnkCap/LnkCtl ("ASPM Disabled;" / "ASPM L1 Enabled;")/LnkSta, ACSCap/ACSCtl, SR-IOV
  "Initial VFs: 8, Total VFs: 8".

Each machine is the base layout with one documented deviation; its capture.yaml `notes` says which.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from numaforge.facts import captures as C  # noqa: E402
from numaforge.facts.captures import Captures, cpulist  # noqa: E402
from numaforge.facts.collect import SPECS  # noqa: E402

ACS_ON = "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
ACS_OFF = "SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"
ACS_CAP = "SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+ DirectTrans+"


@dataclass
class Dev:
    addr: str
    cls: str  # 0604
    cls_name: str
    name: str
    vid: str
    did: str
    rev: str | None = None
    slot: str | None = None
    express: str | None = None  # Root Port / Upstream Port / Downstream Port / Endpoint
    bus: tuple | None = None  # (primary, secondary, subordinate) for bridges
    lnkcap: str = "Speed 16GT/s, Width x16, ASPM L1"
    aspm: str = "Disabled"  # LnkCtl word
    lnksta: str = "Speed 16GT/s (ok), Width x16 (ok)"
    acs: str | None = None  # ACSCtl flags (None = no ACS capability)
    vfs: int | None = None
    driver: str | None = None
    node: int = 0
    group: int | None = 0
    parent: str | None = None


@dataclass
class Machine:
    name: str
    notes: str
    sockets: int = 2
    nps: int = 1
    llc_as_numa: bool = False
    devices: list[Dev] = field(default_factory=list)
    cmdline: str = "BOOT_IMAGE=/vmlinuz-5.10.0-46-amd64 root=/dev/mapper/vg0-root ro quiet iommu=pt amd_iommu=on"
    release: str = "5.10.0-46-amd64"
    livepatches: dict = field(default_factory=dict)  # name -> (enabled, transition)
    iommu_groups: int = 72
    absent: dict = field(default_factory=dict)  # capture name -> reason


CORES_PER_SOCKET = 64
CCX_PER_SOCKET = 8
MEM_PER_SOCKET_KB = 256 * 1024 * 1024  # 256 GiB per socket


def cpus_total(m: Machine) -> int:
    return m.sockets * CORES_PER_SOCKET * 2


def core_cpus(m: Machine, socket: int, core: int) -> list[int]:
    """Linux numbering on 2S EPYC with SMT: first threads of all cores, then their siblings."""
    first = socket * CORES_PER_SOCKET + core
    return [first, first + m.sockets * CORES_PER_SOCKET]


def l3_domains(m: Machine) -> list[list[int]]:
    per = CORES_PER_SOCKET // CCX_PER_SOCKET
    out = []
    for s in range(m.sockets):
        for x in range(CCX_PER_SOCKET):
            out.append(sorted(c for core in range(x * per, (x + 1) * per) for c in core_cpus(m, s, core)))
    return out


def nodes(m: Machine) -> list[list[int]]:
    doms = l3_domains(m)
    if m.llc_as_numa:
        return doms
    if m.nps == 0:
        return [sorted(c for d in doms for c in d)]
    per_node = CCX_PER_SOCKET // m.nps
    return [sorted(c for d in doms[i : i + per_node] for c in d) for i in range(0, len(doms), per_node)]


def socket_of_node(m: Machine, n: int) -> int:
    return n * m.sockets // len(nodes(m))


def distances(m: Machine) -> list[list[int]]:
    ns = len(nodes(m))
    return [
        [10 if a == b else 12 if socket_of_node(m, a) == socket_of_node(m, b) else 32 for b in range(ns)]
        for a in range(ns)
    ]


def node_of_bus(m: Machine, bus: int) -> int:
    """Root complex 00/20/.../e0 -> NUMA node (one quadrant = 2 root complexes' worth of lanes in NPS4)."""
    rc = bus // 0x20  # 0..7, 0-3 socket 0, 4-7 socket 1
    n = len(nodes(m))
    return rc * n // 8


def base_devices(m: Machine) -> list[Dev]:
    devs: list[Dev] = []
    amd = "Advanced Micro Devices, Inc. [AMD]"
    g = iter(range(1, 1000))
    for rc in (0x00, 0x20, 0x40, 0x60, 0x80, 0xA0, 0xC0, 0xE0):
        devs.append(
            Dev(
                f"0000:{rc:02x}:00.0",
                "0600",
                "Host bridge",
                f"{amd} Starship/Matisse Root Complex",
                "1022",
                "1480",
                node=node_of_bus(m, rc),
                group=next(g),
            )
        )
    # BMC VGA (not a GPU) behind its own root port
    devs += [
        Dev(
            "0000:20:03.1",
            "0604",
            "PCI bridge",
            f"{amd} Starship/Matisse GPP Bridge",
            "1022",
            "1483",
            express="Root Port",
            bus=(0x20, 0x21, 0x22),
            acs=ACS_ON,
            driver="pcieport",
            node=node_of_bus(m, 0x20),
            group=next(g),
            lnkcap="Speed 8GT/s, Width x1, ASPM L0s L1",
            lnksta="Speed 5GT/s (downgraded), Width x1 (ok)",
        ),
        Dev(
            "0000:21:00.0",
            "0604",
            "PCI bridge",
            "ASPEED Technology, Inc. AST1150 PCI-to-PCI Bridge",
            "1a03",
            "1150",
            rev="04",
            express="Legacy Endpoint",
            bus=(0x21, 0x22, 0x22),
            node=node_of_bus(m, 0x20),
            group=next(g),
            lnkcap="Speed 5GT/s, Width x1, ASPM L0s L1",
            lnksta="Speed 5GT/s (ok), Width x1 (ok)",
            parent="0000:20:03.1",
        ),
        Dev(
            "0000:22:00.0",
            "0300",
            "VGA compatible controller",
            "ASPEED Technology, Inc. ASPEED Graphics Family",
            "1a03",
            "2000",
            rev="41",
            node=node_of_bus(m, 0x20),
            group=next(g),
            lnkcap="",
            parent="0000:21:00.0",
            driver="ast",
        ),
    ]
    # four GPU+NIC pairs, each behind a Broadcom PEX88096 switch on its own root port
    for i, rc in enumerate((0x40, 0x60, 0xC0, 0xE0)):
        node = node_of_bus(m, rc)
        rp, usp = f"0000:{rc:02x}:01.1", f"0000:{rc + 1:02x}:00.0"
        dsp_g, dsp_n = f"0000:{rc + 2:02x}:00.0", f"0000:{rc + 2:02x}:01.0"
        gpu, nic = f"0000:{rc + 3:02x}:00.0", f"0000:{rc + 4:02x}:00.0"
        sw = "Broadcom / LSI PEX890xx PCIe Gen 4 Switch"
        devs += [
            Dev(
                rp,
                "0604",
                "PCI bridge",
                f"{amd} Starship/Matisse GPP Bridge",
                "1022",
                "1483",
                express="Root Port",
                bus=(rc, rc + 1, rc + 4),
                acs=ACS_ON,
                driver="pcieport",
                node=node,
                group=next(g),
            ),
            Dev(
                usp,
                "0604",
                "PCI bridge",
                sw,
                "1000",
                "c010",
                rev="b0",
                express="Upstream Port",
                bus=(rc + 1, rc + 2, rc + 4),
                driver="pcieport",
                node=node,
                group=next(g),
                parent=rp,
            ),
            Dev(
                dsp_g,
                "0604",
                "PCI bridge",
                sw,
                "1000",
                "c010",
                rev="b0",
                express="Downstream Port",
                bus=(rc + 2, rc + 3, rc + 3),
                acs=ACS_OFF,
                driver="pcieport",
                node=node,
                group=next(g),
                parent=usp,
            ),
            Dev(
                dsp_n,
                "0604",
                "PCI bridge",
                sw,
                "1000",
                "c010",
                rev="b0",
                express="Downstream Port",
                bus=(rc + 2, rc + 4, rc + 4),
                acs=ACS_OFF,
                driver="pcieport",
                node=node,
                group=next(g),
                parent=usp,
            ),
            Dev(
                gpu,
                "0302",
                "3D controller",
                "NVIDIA Corporation GA100 [A100 PCIe 40GB]",
                "10de",
                "20f1",
                rev="a1",
                slot=str(i + 1),
                express="Endpoint",
                lnkcap="Speed 16GT/s, Width x16, ASPM not supported",
                driver="nvidia",
                node=node,
                group=next(g),
                parent=dsp_g,
            ),
            Dev(
                nic,
                "0207",
                "Infiniband controller",
                "Mellanox Technologies MT28908 Family [ConnectX-6]",
                "15b3",
                "101b",
                slot=str(i + 11),
                express="Endpoint",
                vfs=8,
                driver="mlx5_core",
                node=node,
                group=next(g),
                parent=dsp_n,
            ),
        ]
    return devs


# ------------------------------------------------------------------------------------------ renderers
def lspci_vvv(m: Machine) -> str:
    out = []
    for d in sorted(m.devices, key=lambda d: d.addr):
        rev = f" (rev {d.rev})" if d.rev else ""
        progif = " (prog-if 00 [Normal decode])" if d.cls == "0604" else ""
        out.append(f"{d.addr} {d.cls_name} [{d.cls}]: {d.name} [{d.vid}:{d.did}]{rev}{progif}")
        if d.slot:
            out.append(f"\tPhysical Slot: {d.slot}")
        out.append(
            "\tControl: I/O- Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR+ FastB2B- DisINTx+"
        )
        out.append(
            "\tStatus: Cap+ 66MHz- UDF- FastB2B- ParErr- DEVSEL=fast >TAbort- <TAbort- <MAbort- >SERR- <PERR- INTx-"
        )
        if m.sockets * m.nps > 1 or m.llc_as_numa:
            out.append(f"\tNUMA node: {d.node}")
        if d.group is not None:
            out.append(f"\tIOMMU group: {d.group}")
        if d.bus:
            out.append("\tBus: primary={:02x}, secondary={:02x}, subordinate={:02x}, sec-latency=0".format(*d.bus))
        if d.express:
            slot = " (Slot+)" if d.express in ("Root Port", "Downstream Port") else ""
            out.append(f"\tCapabilities: [58] Express (v2) {d.express}{slot}, MSI 00")
            out.append("\t\tDevCap:\tMaxPayload 512 bytes, PhantFunc 0")
            if d.lnkcap:
                out.append(f"\t\tLnkCap:\tPort #0, {d.lnkcap}, Exit Latency L1 <64us")
                out.append("\t\t\tClockPM- Surprise- LLActRep+ BwNot+ ASPMOptComp+")
                out.append(f"\t\tLnkCtl:\tASPM {d.aspm}; RCB 64 bytes, Disabled- CommClk+")
                out.append("\t\t\tExtSynch- ClockPM- AutWidDis- BWInt- AutBWInt-")
                out.append(f"\t\tLnkSta:\t{d.lnksta}")
                out.append("\t\t\tTrErr- Train- SlotClk+ DLActive+ BWMgmt- ABWMgmt-")
                out.append("\t\tLnkCap2: Supported Link Speeds: 2.5-16GT/s, Crosslink- Retimer+ 2Retimers+ DRS-")
                out.append("\t\tLnkCtl2: Target Link Speed: 16GT/s, EnterCompliance- SpeedDis-")
        out.append("\tCapabilities: [a0] MSI: Enable+ Count=1/1 Maskable- 64bit+")
        if d.acs is not None:
            out.append("\tCapabilities: [2a0 v1] Access Control Services")
            out.append(f"\t\tACSCap:\t{ACS_CAP}")
            out.append(f"\t\tACSCtl:\t{d.acs}")
        if d.vfs is not None:
            out.append("\tCapabilities: [180 v1] Single Root I/O Virtualization (SR-IOV)")
            out.append("\t\tIOVCap:\tMigration-, Interrupt Message Number: 000")
            out.append("\t\tIOVCtl:\tEnable- Migration- Interrupt- MSE- ARIHierarchy+")
            out.append(f"\t\tInitial VFs: {d.vfs}, Total VFs: {d.vfs}, Number of VFs: 0, Function Dependency Link: 00")
        if d.driver:
            out.append(f"\tKernel driver in use: {d.driver}")
        out.append("")
    return "\n".join(out) + "\n"


def head(files: list[tuple[str, str]]) -> str:
    return "\n".join(f"==> {p} <==\n{c}\n" for p, c in files).rstrip("\n") + "\n"


def sys_node(m: Machine) -> str:
    ns = nodes(m)
    files = [
        ("/sys/devices/system/node/online", f"0-{len(ns) - 1}" if len(ns) > 1 else "0"),
        ("/sys/devices/system/node/possible", f"0-{len(ns) - 1}" if len(ns) > 1 else "0"),
    ]
    dist = distances(m)
    mem = MEM_PER_SOCKET_KB * m.sockets // len(ns)
    for i, cpus in enumerate(ns):
        files.append((f"/sys/devices/system/node/node{i}/cpulist", cpulist(cpus)))
    for i in range(len(ns)):
        files.append((f"/sys/devices/system/node/node{i}/distance", " ".join(str(x) for x in dist[i])))
    for i in range(len(ns)):
        files.append(
            (
                f"/sys/devices/system/node/node{i}/meminfo",
                f"Node {i} MemTotal:       {mem} kB\nNode {i} MemFree:        {mem - 4194304} kB\n"
                f"Node {i} MemUsed:         4194304 kB",
            )
        )
    return head(files)


def sys_cpu(m: Machine) -> str:
    n = cpus_total(m)
    pkg = {}
    sib = {}
    for s in range(m.sockets):
        for core in range(CORES_PER_SOCKET):
            cs = core_cpus(m, s, core)
            for c in cs:
                pkg[c], sib[c] = s, cpulist(cs)
    l3 = {c: cpulist(d) for d in l3_domains(m) for c in d}
    files = [(f"/sys/devices/system/cpu/cpu{c}/topology/physical_package_id", str(pkg[c])) for c in range(n)]
    files += [(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list", sib[c]) for c in range(n)]
    files += [(f"/sys/devices/system/cpu/cpu{c}/cache/index3/level", "3") for c in range(n)]
    files += [(f"/sys/devices/system/cpu/cpu{c}/cache/index3/shared_cpu_list", l3[c]) for c in range(n)]
    return head(files)


def sys_pci(m: Machine) -> str:
    devs = sorted(m.devices, key=lambda d: d.addr)
    files = []
    for attr in ("class", "vendor", "device", "numa_node", "sriov_totalvfs"):
        for d in devs:
            if attr == "class":
                prog = "00"
                files.append((f"/sys/bus/pci/devices/{d.addr}/class", f"0x{d.cls}{prog}"))
            elif attr == "vendor":
                files.append((f"/sys/bus/pci/devices/{d.addr}/vendor", f"0x{d.vid}"))
            elif attr == "device":
                files.append((f"/sys/bus/pci/devices/{d.addr}/device", f"0x{d.did}"))
            elif attr == "numa_node":
                files.append((f"/sys/bus/pci/devices/{d.addr}/numa_node", str(d.node)))
            elif d.vfs is not None:
                files.append((f"/sys/bus/pci/devices/{d.addr}/sriov_totalvfs", str(d.vfs)))
    return head(files)


def pci_links(m: Machine) -> str:
    by = {d.addr: d for d in m.devices}
    lines = ["total 0"]
    for d in sorted(m.devices, key=lambda d: d.addr):
        chain, cur = [d.addr], d
        while cur.parent:
            chain.append(cur.parent)
            cur = by[cur.parent]
        root = f"pci{chain[-1][:4]}:{chain[-1][5:7]}"
        path = "/".join([f"../../../devices/{root}"] + list(reversed(chain)))
        lines.append(f"lrwxrwxrwx 1 root root 0 Dec  2 09:14 {d.addr} -> {path}")
    return "\n".join(lines) + "\n"


def numactl(m: Machine) -> str:
    ns = nodes(m)
    mem_mb = MEM_PER_SOCKET_KB * m.sockets // len(ns) // 1024
    out = [f"available: {len(ns)} nodes (0-{len(ns) - 1})" if len(ns) > 1 else "available: 1 nodes (0)"]
    for i, cpus in enumerate(ns):
        out.append(f"node {i} cpus: {' '.join(str(c) for c in cpus)}")
        out.append(f"node {i} size: {mem_mb} MB")
        out.append(f"node {i} free: {mem_mb - 4096} MB")
    out.append("node distances:")
    out.append("node " + "".join(f"{i:>4}" for i in range(len(ns))) + " ")
    for i, row in enumerate(distances(m)):
        out.append(f"{i:>3}: " + "".join(f"{x:>4}" for x in row) + " ")
    return "\n".join(out) + "\n"


def lscpu(m: Machine) -> str:
    n = cpus_total(m)
    rows = [
        ("Architecture", "x86_64"),
        ("CPU op-mode(s)", "32-bit, 64-bit"),
        ("Address sizes", "48 bits physical, 48 bits virtual"),
        ("Byte Order", "Little Endian"),
        ("CPU(s)", str(n)),
        ("On-line CPU(s) list", f"0-{n - 1}"),
        ("Vendor ID", "AuthenticAMD"),
        ("Model name", "AMD EPYC 7763 64-Core Processor"),
        ("CPU family", "25"),
        ("Model", "1"),
        ("Thread(s) per core", "2"),
        ("Core(s) per socket", str(CORES_PER_SOCKET)),
        ("Socket(s)", str(m.sockets)),
        ("Stepping", "1"),
        ("Frequency boost", "enabled"),
        ("CPU max MHz", "3529.0520"),
        ("CPU min MHz", "1500.0000"),
        ("BogoMIPS", "4890.81"),
        ("Virtualization", "AMD-V"),
        ("L1d cache", f"{4 * m.sockets} MiB ({CORES_PER_SOCKET * m.sockets} instances)"),
        ("L1i cache", f"{4 * m.sockets} MiB ({CORES_PER_SOCKET * m.sockets} instances)"),
        ("L2 cache", f"{64 * m.sockets} MiB ({CORES_PER_SOCKET * m.sockets} instances)"),
        ("L3 cache", f"{256 * m.sockets} MiB ({CCX_PER_SOCKET * m.sockets} instances)"),
        ("NUMA node(s)", str(len(nodes(m)))),
    ]
    rows += [(f"NUMA node{i} CPU(s)", cpulist(c)) for i, c in enumerate(nodes(m))]
    return "".join(f"{k + ':':<40} {v}\n" for k, v in rows)


def cpuinfo(m: Machine) -> str:
    return (
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
        "model name\t: AMD EPYC 7763 64-Core Processor\nstepping\t: 1\nphysical id\t: 0\n"
        f"siblings\t: {CORES_PER_SOCKET * 2}\ncore id\t\t: 0\ncpu cores\t: {CORES_PER_SOCKET}\n\n"
    )


def proc_kernel(m: Machine) -> str:
    files = [
        ("/proc/cmdline", m.cmdline),
        ("/proc/sys/kernel/osrelease", m.release),
        ("/proc/sys/kernel/tainted", "0" if not m.livepatches else "32768"),
        ("/proc/sys/kernel/numa_balancing", "1"),
    ]
    for name, (en, _tr) in sorted(m.livepatches.items()):
        files.append((f"/sys/kernel/livepatch/{name}/enabled", "1" if en else "0"))
    for name, (_en, tr) in sorted(m.livepatches.items()):
        files.append((f"/sys/kernel/livepatch/{name}/transition", "1" if tr else "0"))
    return head(files)


def lspci_tree(m: Machine) -> str:
    # `lspci -t -D` is kept for humans only (parsers use lspci -vvv and the sysfs links)
    return "".join(f"-[{d.addr[:7]}]-\\-{d.addr[8:]}\n" for d in m.devices if d.cls == "0600")


def write(m: Machine) -> Path:
    d = HERE / m.name
    if d.exists():
        shutil.rmtree(d)
    makers = {
        C.LSPCI: lspci_vvv,
        C.LSPCI_TREE: lspci_tree,
        C.NUMACTL: numactl,
        C.LSCPU: lscpu,
        C.CPUINFO: cpuinfo,
        C.UNAME: lambda m: m.release + "\n",
        C.SYS_NODE: sys_node,
        C.SYS_CPU: sys_cpu,
        C.SYS_PCI: sys_pci,
        C.PCI_LINKS: pci_links,
        C.IOMMU_GROUPS: lambda m: "".join(f"{i}\n" for i in sorted(range(m.iommu_groups), key=str)),
        C.PROC_KERNEL: proc_kernel,
    }
    cap = Captures(source=m.name, notes=m.notes, commands={s.name: s.command for s in SPECS})
    for name, fn in makers.items():
        if name in m.absent:
            cap.absent[name] = m.absent[name]
        else:
            cap.files[name] = fn(m)
    return cap.save(d)


def machine(name: str, notes: str, **kw) -> Machine:
    m = Machine(
        name,
        notes,
        **{
            k: v
            for k, v in kw.items()
            if k in ("sockets", "nps", "llc_as_numa", "cmdline", "livepatches", "iommu_groups", "absent")
        },
    )
    m.devices = base_devices(m)
    return m


def main() -> None:
    base_note = (
        "Fixture written from public documentation (see make_fixtures.py), not captured. 2x AMD EPYC 7763, "
        "4x NVIDIA A100 PCIe + 4x ConnectX-6, each GPU/NIC pair behind one PCIe Gen4 switch. "
    )
    good = machine(
        "epyc-7763-2s-nps1-4gpu",
        base_note + "The intended GPUDirect layout: NPS1 (2 nodes), LLC as "
        "NUMA off, ACS off on the switch ports, ASPM disabled, IOMMU on (iommu=pt), SR-IOV 8 VFs, "
        "a kpatch livepatch loaded.",
        livepatches={"kpatch_sched_numa_prefer_local_fallback": (True, False)},
    )
    write(good)

    nps4 = machine(
        "epyc-nps4-acs-enabled",
        base_note + "Deviations: BIOS left at NPS4 (8 nodes, 4 per socket) and "
        "ACS still enabled (SrcValid+ ReqRedir+ CmpltRedir+) on every switch downstream port.",
        nps=4,
    )
    for d in nps4.devices:
        if d.acs == ACS_OFF:
            d.acs = ACS_ON
    write(nps4)

    llc = machine(
        "epyc-llc-as-numa", base_note + "Deviation: LLC as NUMA node on: 16 nodes, one per L3 (CCX).", llc_as_numa=True
    )
    write(llc)

    wrong = machine(
        "epyc-gpu-wrong-node",
        base_note + "Deviation: the GPU in slot 3 (0000:c3:00.0, socket 1 root "
        "complex) reports NUMA node 0 while its NIC 0000:c4:00.0 reports node 1.",
    )
    for d in wrong.devices:
        if d.addr == "0000:c3:00.0":
            d.node = 0
    write(wrong)

    aspm = machine(
        "epyc-aspm-l1-on-nics",
        base_note + "Deviation: ASPM L1 enabled on the NIC links (NIC and its "
        "switch downstream port), lspci LnkCtl 'ASPM L1 Enabled;'; one GPU link trained down to 8GT/s x8.",
    )
    nic_ports = {d.parent for d in aspm.devices if d.cls == "0207"}
    for d in aspm.devices:
        if d.cls == "0207" or d.addr in nic_ports:
            d.aspm = "L1 Enabled"
        if d.addr == "0000:63:00.0":
            d.lnksta = "Speed 8GT/s (downgraded), Width x8 (downgraded)"
    write(aspm)

    nolspci = machine(
        "epyc-no-lspci",
        base_note + "Deviation: pciutils not installed on the host, so lspci is "
        "absent (the reason is what collect() records); sysfs is there.",
        absent={
            C.LSPCI: "lspci is not installed on the host; install pciutils on the host to get "
            "these facts (numaforge installs nothing)",
            C.LSPCI_TREE: "lspci is not installed on the host; install pciutils on the host to "
            "get these facts (numaforge installs nothing)",
        },
    )
    write(nolspci)

    noiommu = machine(
        "epyc-iommu-off-no-sriov",
        base_note + "Deviations: IOMMU off in the BIOS (no IOMMU groups, "
        "amd_iommu=off not needed) and SR-IOV off (NICs offer 0 VFs).",
        iommu_groups=0,
        cmdline="BOOT_IMAGE=/vmlinuz-5.10.0-46-amd64 root=/dev/mapper/vg0-root ro quiet",
    )
    for d in noiommu.devices:
        if d.vfs is not None:
            d.vfs = 0
        d.group = None
    write(noiommu)


if __name__ == "__main__":
    main()
