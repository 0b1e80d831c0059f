"""Pure finding rules: parsed samples in, findings out (thresholds and why: docs/numa-audit.md).

A finding names its check, severity (crit > warn > info), what is wrong, the evidence (numbers and the files
they came from) and the fix (an os-apply / bios-apply setting or a command). A check that cannot be made on a
host's kernel says so ("not available on this kernel: ...") instead of guessing; that is an ``info`` note.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from ..hostos.read import HostState, Interrupt
from .parse import NO_BUFFER_COUNTERS, PciPlacement, ProcStatus, SchedDebug, Schedstat, Softnet, Vma

SEVERITIES = ("crit", "warn", "info")

# talk 2.2: nr_spread_over growth per cfs_rq over the window: healthy < 3, imbalance > 15 sustained 10 s
SPREAD_OVER_HEALTHY = 3
SPREAD_OVER_IMBALANCE = 15
SUSTAIN_SECONDS = 10.0
# talk 2.2's 20/60 ms: applied to each runqueue's own vruntime spread (never min_vruntime across CPUs)
SPREAD_WARN_MS = 20.0
SPREAD_CRIT_MS = 60.0
# node imbalance: runnable tasks per CPU, busiest node minus idlest, in both samples
NODE_RUNNABLE_GAP = 1.0
# 2.3: remote share of a pinned process's resident pages, and the smallest footprint judged (pages)
REMOTE_SHARE_WARN = 0.25
MIN_PAGES = 256
# 2.4: interrupts of one device in the window before its placement is judged; share on one CPU
MIN_IRQS = 200
ONE_CPU_SHARE = 0.9
OFF_LOCAL_SHARE = 0.5


@dataclass
class Finding:
    check: str
    severity: str
    what: str
    evidence: list[str] = field(default_factory=list)
    fix: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def unavailable(check: str, why: str, files: str) -> Finding:
    return Finding(check, "info", f"not available on this kernel: {why}", [f"looked for {files}"], "")


def node_of(nodes: dict[int, list[int]]) -> dict[int, int]:
    return {cpu: n for n, cpus in nodes.items() for cpu in cpus}


# --------------------------------------------------------------------------------------------- 2.2 scheduler
def sched_imbalance(
    a: SchedDebug | None, b: SchedDebug | None, window: float, nodes: dict[int, list[int]], source: str, why_absent: str
) -> list[Finding]:
    check = "sched-imbalance"
    if a is None or b is None:
        return [unavailable(check, why_absent, "/proc/sched_debug, /sys/kernel/debug/sched/debug")]
    out: list[Finding] = []
    # node runnable tasks per CPU, in both samples (sustained)
    if len(nodes) > 1:
        gaps = []
        per = []
        for s in (a, b):
            avg = {n: sum(s.cpu_nr_running.get(c, 0) for c in cpus) / len(cpus) for n, cpus in nodes.items() if cpus}
            load = {n: sum(s.cpus[c].load_avg for c in cpus if c in s.cpus) for n, cpus in nodes.items()}
            # tasks wait on the busiest node (> 1 per CPU) while the idlest has idle CPUs (< 1 per CPU)
            busy_avg, idle_avg = (max(avg.values()), min(avg.values())) if avg else (0.0, 0.0)
            gaps.append(busy_avg - idle_avg if busy_avg > 1 and idle_avg < 1 else 0.0)
            per.append((avg, load))
        if gaps and min(gaps) >= NODE_RUNNABLE_GAP:
            avg, load = per[1]
            busy = max(avg, key=lambda n: avg[n])
            idle = min(avg, key=lambda n: avg[n])
            out.append(
                Finding(
                    check,
                    "warn",
                    f"node {busy} runs {avg[busy]:.1f} tasks per CPU, node {idle} {avg[idle]:.1f} (in both samples, "
                    f"{window:.0f} s apart; limit {NODE_RUNNABLE_GAP:.1f})",
                    [
                        f"{source}: nr_running per node " + ", ".join(f"node{n}={avg[n]:.1f}/cpu" for n in sorted(avg)),
                        f"{source}: cfs load_avg per node " + ", ".join(f"node{n}={load[n]}" for n in sorted(load)),
                    ],
                    "find the pinning that keeps tasks on one node (taskset/cpuset of the busy tasks: "
                    "`ps -eLo pid,psr,comm`); spread them with `numactl --cpunodebind=N` per instance",
                )
            )
    # per cfs_rq: spread within the runqueue, nr_spread_over growth
    have_over = any(rq.nr_spread_over is not None for rq in b.cpus.values())
    if not have_over:
        out.append(unavailable(check, "no nr_spread_over (EEVDF scheduler, 6.6+)", f"{source} cfs_rq fields"))
    for cpu, rq in sorted(b.cpus.items()):
        if rq.spread_ms is not None and rq.spread_ms > SPREAD_WARN_MS:
            sev = "crit" if rq.spread_ms > SPREAD_CRIT_MS else "warn"
            out.append(
                Finding(
                    check,
                    sev,
                    f"cpu{cpu}: vruntime spread {rq.spread_ms:.1f} ms within its runqueue "
                    f"(limit {SPREAD_WARN_MS:.0f} ms warn, {SPREAD_CRIT_MS:.0f} ms crit)",
                    [f"{source}: cfs_rq[{cpu}]:/ .spread {rq.spread_ms:.3f} .nr_running {rq.nr_running}"],
                    "too many runnable tasks on this CPU: widen the affinity of the tasks pinned to it",
                )
            )
        ra = a.cpus.get(cpu)
        if have_over and ra is not None and ra.nr_spread_over is not None and rq.nr_spread_over is not None:
            grew = rq.nr_spread_over - ra.nr_spread_over
            if grew > SPREAD_OVER_IMBALANCE and window >= SUSTAIN_SECONDS:
                sev = "warn"
            elif grew >= SPREAD_OVER_HEALTHY:
                sev = "info"
            else:
                continue
            out.append(
                Finding(
                    check,
                    sev,
                    f"cpu{cpu}: nr_spread_over grew by {grew} in {window:.0f} s (healthy < {SPREAD_OVER_HEALTHY}, "
                    f"imbalance > {SPREAD_OVER_IMBALANCE} over {SUSTAIN_SECONDS:.0f} s)",
                    [f"{source}: cfs_rq[{cpu}]:/ .nr_spread_over {ra.nr_spread_over} -> {rq.nr_spread_over}"],
                    "widen the affinity of the tasks crowding this CPU",
                )
            )
    return out


def schedstat_note(a: Schedstat | None, b: Schedstat | None, window: float) -> list[Finding]:
    if a is None or b is None:
        return [unavailable("sched-imbalance", "no /proc/schedstat (CONFIG_SCHEDSTATS off)", "/proc/schedstat")]
    failed = b.lb_failed - a.lb_failed
    count = b.lb_count - a.lb_count
    if count > 0 and failed > count // 2 and failed >= 100:
        return [
            Finding(
                "sched-imbalance",
                "warn",
                f"load balancing failed {failed} of {count} times in {window:.0f} s (tasks cannot move: pinned?)",
                [
                    f"/proc/schedstat: lb_failed +{failed}, lb_count +{count}, lb_imbalance +{b.lb_imbalance - a.lb_imbalance}"
                ],
                "look for tasks pinned to few CPUs (taskset -p PID); widen their affinity",
            )
        ]
    return []


# --------------------------------------------------------------------------------------------- 2.3 cpuset
def cpuset_membind(
    procs: list[tuple[ProcStatus, list[Vma]]],
    nodes: dict[int, list[int]],
    release: tuple[int, int] | None,
    numa_balancing: str | None,
) -> list[Finding]:
    out: list[Finding] = []
    if len(nodes) < 2:
        return out
    cpu_node = node_of(nodes)
    for st, vmas in procs:
        cpu_nodes = sorted({cpu_node[c] for c in st.cpus if c in cpu_node})
        if not cpu_nodes or len(cpu_nodes) == len(nodes):
            continue  # not pinned to a subset of nodes
        where = f"/proc/{st.pid}"
        vmas = [v for v in vmas if not v.path]  # anonymous memory: file pages sit where the page cache put them
        total = sum(sum(v.pages.values()) for v in vmas)
        per_node: dict[int, int] = {}
        for v in vmas:
            for n, p in v.pages.items():
                per_node[n] = per_node.get(n, 0) + p
        remote = sum(p for n, p in per_node.items() if n not in cpu_nodes)
        mems_off = [n for n in st.mems if n not in cpu_nodes]
        nl = ",".join(map(str, cpu_nodes))
        cg = st.cgroup
        where_cg = f"cgroup {cg['path']}: " if cg else "the cgroup's "
        fix = f"numactl --cpunodebind={nl} --membind={nl} <command> (or {where_cg}cpuset.mems={nl} next to its cpuset.cpus)"
        evidence = [
            f"{where}/status: Cpus_allowed_list -> node(s) {nl}, Mems_allowed_list {_list(st.mems)}",
            f"{where}/numa_maps: pages per node "
            + (", ".join(f"N{n}={p}" for n, p in sorted(per_node.items())) or "none"),
        ]
        if cg:
            evidence.append(f"{cg['cpus_file']}: {cg['cpus']}; {cg['mems_file']}: {cg['mems']}")
        if total >= MIN_PAGES and remote / total >= REMOTE_SHARE_WARN:
            out.append(
                Finding(
                    "cpuset-membind",
                    "warn",
                    f"{st.name} ({st.pid}) runs on node(s) {nl} but {remote / total:.0%} of its {total} pages are on "
                    f"other nodes (limit {REMOTE_SHARE_WARN:.0%})",
                    evidence,
                    fix,
                )
            )
        elif mems_off and total >= MIN_PAGES:
            out.append(
                Finding(
                    "cpuset-membind",
                    "info",
                    f"{st.name} ({st.pid}) runs on node(s) {nl} but may allocate on node(s) {_list(mems_off)}",
                    evidence,
                    fix,
                )
            )
        bound = [v for v in vmas if v.policy.startswith("bind") and any(n not in cpu_nodes for n in v.pages)]
        if bound and release is not None and release < (5, 12) and numa_balancing not in (None, "0"):
            out.append(
                Finding(
                    "cpuset-membind",
                    "info",
                    f"{st.name} ({st.pid}): {len(bound)} bound VMA(s) with pages off its CPUs' nodes; NUMA balancing "
                    f"on {release[0]}.{release[1]} does not migrate MPOL_BIND memory (5.12 added it)",
                    [f"{where}/numa_maps: {v.addr} {v.policy}" for v in bound[:3]],
                    fix,
                )
            )
    return out


def _list(xs: list[int]) -> str:
    return ",".join(map(str, xs)) or "-"


# --------------------------------------------------------------------------------------------- 2.4 IRQs
_DEV = re.compile(r"^([A-Za-z_]+\d+)")


def device_of(irq: Interrupt) -> str | None:
    """ "virtio2-input.0" -> "virtio2", "eth0-TxRx-3" -> "eth0", "nvme0q1" -> "nvme0"; None for timers etc."""
    m = _DEV.match(irq.name.split()[0]) if irq.name else None
    return m.group(1) if m else None


LEGACY_CHIPS = ("IO-APIC", "XT-PIC")


def legacy_isa(intr: Interrupt) -> bool:
    """An x86 legacy ISA interrupt (IRQ 0-15 through the IO-APIC or the 8259 PIC: i8042 keyboard/mouse, rtc0,
    ttyS0...): slow devices on the platform's fixed routing, which the kernel targets at one CPU; not a NUMA fault."""
    return intr.irq.isdigit() and int(intr.irq) < 16 and intr.chip in LEGACY_CHIPS


def _irq_deltas(a: dict[str, Interrupt], b: dict[str, Interrupt]) -> tuple[dict[str, list[int]], dict[str, list[str]]]:
    """Per device: its interrupts per CPU between the two samples, and its IRQ numbers."""
    per_dev: dict[str, list[int]] = {}
    irqs: dict[str, list[str]] = {}
    for irq, cur in b.items():
        prev = a.get(irq)
        dev = device_of(cur)
        if prev is None or dev is None:
            continue
        delta = [max(0, x - y) for x, y in zip(cur.counts, prev.counts)]
        acc = per_dev.setdefault(dev, [0] * len(delta))
        for i, d in enumerate(delta):
            if i < len(acc):
                acc[i] += d
        irqs.setdefault(dev, []).append(irq)
    return per_dev, irqs


def irq_placement(
    a: dict[str, Interrupt],
    b: dict[str, Interrupt],
    window: float,
    local_cpus: dict[str, list[int]],
    ncpus: int,
    affinity: dict[str, list[int]] | None = None,
) -> list[Finding]:
    """Per device: its IRQs forced onto one CPU (smp_affinity_list), the share of its interrupts in the window on
    its busiest CPU (when the affinity files were not readable) and off its local CPUs."""
    affinity = affinity or {}
    out: list[Finding] = []
    per_dev, irqs = _irq_deltas(a, b)
    for dev, counts in sorted(per_dev.items()):
        total = sum(counts)
        ev = [
            f"/proc/interrupts (2 samples {window:.0f} s apart), IRQs {','.join(irqs[dev])}: "
            + (" ".join(f"cpu{i}={c}" for i, c in enumerate(counts) if c) or "no interrupts")
        ]
        known = {i: affinity[i] for i in irqs[dev] if i in affinity}
        single = {i: cpus[0] for i, cpus in known.items() if len(cpus) == 1}
        fix = (
            "spread the queues' IRQs over the device's local CPUs: os-apply irq_affinity for the device "
            "(or `echo CPU > /proc/irq/N/smp_affinity_list` per queue; stop whatever pins them, e.g. irqbalance hints)"
        )
        if ncpus > 1 and len(single) >= 2 and len(set(single.values())) == 1:
            cpu = next(iter(single.values()))
            pinned = [
                f"/proc/irq/{i}/smp_affinity_list: {c}" for i, c in sorted(single.items(), key=lambda x: int(x[0]))
            ]
            if all(legacy_isa(b[i]) for i in single):
                what = (
                    f"{dev}: legacy ISA IRQs {','.join(sorted(single, key=int))} ({b[next(iter(single))].chip}) "
                    f"pinned to cpu{cpu}: the platform's routing of a slow legacy device, not a NUMA fault"
                )
                out.append(Finding("irq-placement", "info", what, ev + pinned, "nothing to do"))
            else:
                what = (
                    f"{dev}: {len(single)} of its {len(irqs[dev])} IRQs are pinned to cpu{cpu} alone "
                    f"({counts[cpu] if cpu < len(counts) else 0} of {total} interrupts in the window there)"
                )
                out.append(Finding("irq-placement", "warn", what, ev + pinned, fix))
        elif not known and total >= MIN_IRQS and ncpus > 1 and len(irqs[dev]) > 1:
            top = max(range(len(counts)), key=lambda i: counts[i])
            if counts[top] / total >= ONE_CPU_SHARE:
                out.append(
                    Finding(
                        "irq-placement",
                        "warn",
                        f"{dev}: {counts[top] / total:.0%} of {total} interrupts of its {len(irqs[dev])} IRQs on cpu{top}",
                        ev + ["/proc/irq/N/smp_affinity_list: not readable"],
                        fix,
                    )
                )
        if total < MIN_IRQS:
            continue
        local = local_cpus.get(dev)
        if local:
            off = sum(c for i, c in enumerate(counts) if i not in local)
            if off / total >= OFF_LOCAL_SHARE:
                out.append(
                    Finding(
                        "irq-placement",
                        "warn",
                        f"{dev}: {off / total:.0%} of {total} interrupts handled off its local CPUs {_list(local)}",
                        ev,
                        "os-apply irq_affinity: the device's local CPUs",
                    )
                )
    return out


def softnet(a: dict[int, Softnet] | None, b: dict[int, Softnet] | None, window: float) -> list[Finding]:
    if not a or not b:
        return []
    dropped = {c: b[c].dropped - a[c].dropped for c in b if c in a and b[c].dropped > a[c].dropped}
    squeeze = {c: b[c].time_squeeze - a[c].time_squeeze for c in b if c in a and b[c].time_squeeze > a[c].time_squeeze}
    out = []
    if dropped:
        out.append(
            Finding(
                "irq-placement",
                "warn",
                f"softnet backlog dropped {sum(dropped.values())} packets in {window:.0f} s",
                ["/proc/net/softnet_stat dropped: " + " ".join(f"cpu{c}=+{d}" for c, d in sorted(dropped.items()))],
                "spread RX queues/RPS over more CPUs of the NIC's node; sysctl net.core.netdev_max_backlog",
            )
        )
    if sum(squeeze.values()) >= 10:
        out.append(
            Finding(
                "irq-placement",
                "info",
                f"net_rx_action ran out of budget {sum(squeeze.values())} times in {window:.0f} s (time_squeeze)",
                [
                    "/proc/net/softnet_stat time_squeeze: "
                    + " ".join(f"cpu{c}=+{d}" for c, d in sorted(squeeze.items()))
                ],
                "spread the NIC's IRQs over more local CPUs; sysctl net.core.netdev_budget",
            )
        )
    return out


def nic_counters(a: dict[str, dict[str, int]], b: dict[str, dict[str, int]], window: float) -> list[Finding]:
    out = []
    for nic, stats in sorted(b.items()):
        before = a.get(nic, {})
        grew = {
            k: stats[k] - before[k] for k in NO_BUFFER_COUNTERS if k in stats and k in before and stats[k] > before[k]
        }
        if grew:
            out.append(
                Finding(
                    "irq-placement",
                    "warn",
                    f"{nic}: the NIC dropped packets for want of buffers in {window:.0f} s",
                    [f"ethtool -S {nic}: " + ", ".join(f"{k} +{v}" for k, v in sorted(grew.items()))],
                    "the RX rings are not drained fast enough: IRQs on the NIC's local CPUs (os-apply irq_affinity), "
                    "larger rings (`ethtool -G`)",
                )
            )
    return out


# --------------------------------------------------------------------------------------------- 2.5, 4.3, THP, governor
_ZONE_RECLAIM = re.compile(r"[0-9]{1,10}")


def zone_reclaim_mode(text: str | None) -> int | None:
    """/proc/sys/vm/zone_reclaim_mode as the kernel prints it (a non-negative int, a bit mask: 1 reclaim, 2 write,
    4 unmap); None for an absent file or anything else (cannot tell)."""
    value = (text or "").strip()
    if not _ZONE_RECLAIM.fullmatch(value) or int(value) > 2**31 - 1:
        return None
    return int(value)


def host_os(state: HostState, nodes: dict[int, list[int]], pci_nodes: dict[str, int | None]) -> list[Finding]:
    out = []
    zr = state.sysctls.get("vm.zone_reclaim_mode")
    mode = zone_reclaim_mode(zr)
    if zr is not None and mode is None:  # peer data the kernel never prints: cannot tell, never a default
        out.append(
            Finding(
                "zone-reclaim",
                "warn",
                f"cannot tell whether zone reclaim is on: vm.zone_reclaim_mode reads {zr[:40]!r}, not the "
                "non-negative number the kernel prints",
                [f"/proc/sys/vm/zone_reclaim_mode: {zr[:40]!r}"],
                "read /proc/sys/vm/zone_reclaim_mode on the host (hostos_root, if set, points at the wrong tree?); "
                "os-apply sysctl vm.zone_reclaim_mode: 0 sets it",
            )
        )
    elif mode:
        out.append(
            Finding(
                "zone-reclaim",
                "warn",
                f"vm.zone_reclaim_mode is {zr}: the kernel reclaims (drops page cache) on the local node before "
                "allocating on another",
                [f"/proc/sys/vm/zone_reclaim_mode: {zr}"],
                "os-apply sysctl vm.zone_reclaim_mode: 0",
            )
        )
    none_local = [a for a, n in sorted(pci_nodes.items()) if n is not None and n < 0]
    if len(nodes) > 1 and none_local and len(none_local) == len(pci_nodes):
        # no device at all has a node: the firmware (or a VM's machine model) describes no PCI locality -- one note
        out.append(
            Finding(
                "device-node",
                "info",
                f"no PCI device reports a NUMA node ({len(none_local)} devices say -1): the firmware gives the PCI "
                "roots no proximity domain (ACPI _PXM), so device locality is unknown",
                [f"/sys/bus/pci/devices/{a}/numa_node: -1" for a in none_local[:3]],
                "bios-apply a profile whose firmware reports device locality; os-apply expect_node to state it",
            )
        )
    elif len(nodes) > 1:
        for addr, n in sorted(pci_nodes.items()):
            if n is not None and n < 0:
                out.append(
                    Finding(
                        "device-node",
                        "warn",
                        f"{addr}: numa_node -1 on a {len(nodes)}-node host (the firmware gives no locality: ACPI _PXM)",
                        [f"/sys/bus/pci/devices/{addr}/numa_node: -1"],
                        "bios-apply with a profile that reports device locality (NPS / ACPI SRAT), or set "
                        "os-apply expect_node to find out which node it is",
                    )
                )
    enabled = state.thp.get("enabled", (None, []))[0]
    defrag = state.thp.get("defrag", (None, []))[0]
    if enabled == "always" and defrag == "always":
        out.append(
            Finding(
                "thp",
                "info",
                "transparent hugepages: enabled=always with defrag=always stalls allocations in direct compaction",
                [f"/sys/kernel/mm/transparent_hugepage/defrag: {defrag}"],
                "os-apply thp defrag: madvise",
            )
        )
    slow = sorted(c for c, g in state.governors.items() if g not in ("performance",))
    if slow:
        out.append(
            Finding(
                "governor",
                "info",
                f"{len(slow)} CPU(s) not on the performance governor ({state.governors[slow[0]]})",
                [f"/sys/devices/system/cpu/cpu{slow[0]}/cpufreq/scaling_governor: {state.governors[slow[0]]}"],
                "os-apply governor: performance",
            )
        )
    return out


KINDS = {"02": "NIC", "0108": "NVMe", "03": "GPU", "12": "accelerator"}


def kind_of(pci_class: str) -> str | None:
    c = pci_class.strip().lower().removeprefix("0x")
    return next((k for p, k in KINDS.items() if c.startswith(p)), None)


def shared_root_ports(devices: list[PciPlacement]) -> list[Finding]:
    """NICs, NVMe drives, GPUs below one root port (several physical devices; functions of one device count once)."""
    by_port: dict[str, list[PciPlacement]] = {}
    for d in devices:
        if d.root_port and kind_of(d.pci_class):
            by_port.setdefault(d.root_port, []).append(d)
    out = []
    for port, devs in sorted(by_port.items()):
        physical = {d.addr.rsplit(".", 1)[0] for d in devs}
        if len(physical) < 2:
            continue
        out.append(
            Finding(
                "pcie-sharing",
                "info",
                f"{len(physical)} devices share root port {port} ("
                + ", ".join(f"{kind_of(d.pci_class)} {d.addr}" for d in devs)
                + "): their traffic and interrupts contend for one link",
                [f"/sys/bus/pci/devices/{d.addr}: below {d.root_complex}/{port}, link {d.link or '?'}" for d in devs],
                "keep the busiest of them on different root ports (slots) or pin their work to the same node's CPUs",
            )
        )
    return out


def node_layout(
    nodes: dict[int, list[int]],
    pci_nodes: dict[str, int | None],
    pci_local: dict[str, list[int]],
    nps: int | None,
    sockets: int | None,
) -> list[Finding]:
    """4.3: the nodes online against sockets x the BIOS profile's NPS; each device's numa_node online and its
    local_cpulist the node's CPUs."""
    out = []
    online = sorted(nodes)
    if nps is not None and sockets:
        expected = sockets * nps if nps > 0 else 1
        if len(online) != expected:
            out.append(
                Finding(
                    "device-node",
                    "warn",
                    f"{len(online)} NUMA nodes online, the BIOS profile means {expected} ({sockets} socket(s) x NPS {nps})",
                    [f"/sys/devices/system/node/node*/cpulist: nodes {_list(online)}"],
                    "bios-verify, then bios-apply the profile (NPS takes effect after a reboot)",
                )
            )
    for addr, n in sorted(pci_nodes.items()):
        if n is None or n < 0 or not online:
            continue
        if n not in nodes:
            out.append(
                Finding(
                    "device-node",
                    "warn",
                    f"{addr}: numa_node {n} is not an online node (online: {_list(online)})",
                    [f"/sys/bus/pci/devices/{addr}/numa_node: {n}"],
                    "bios-verify (the firmware's proximity domains)",
                )
            )
        elif pci_local.get(addr) and pci_local[addr] != nodes[n]:
            out.append(
                Finding(
                    "device-node",
                    "warn",
                    f"{addr}: numa_node {n} but its local CPUs {_list(pci_local[addr])} are not node {n}'s "
                    f"{_list(nodes[n])}",
                    [
                        f"/sys/bus/pci/devices/{addr}/numa_node: {n}",
                        f"/sys/bus/pci/devices/{addr}/local_cpulist: {_list(pci_local[addr])}",
                    ],
                    "bios-verify (the firmware's proximity domains)",
                )
            )
    return out


def status(findings: list[Finding]) -> tuple[str, str]:
    """Host status and message: any warn/crit fails the host (it is not ok); notes alone leave it ok."""
    counts = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}
    msg = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no findings"
    return ("failed" if counts["crit"] or counts["warn"] else "ok"), msg
