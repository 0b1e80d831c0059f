"""numa-audit per host and over the fleet: one POSIX-sh script over SSH (read-only), two samples a window apart.

    outcome = audit_fleet(hosts, AuditOptions(window=10), Rollout(forks=8))

The script (``audit_script``) prints the files once (nodes, sysctls, THP, governors, PCI numa_node, every
process's status and numa_maps, the kernel release) and the sampled files twice, ``window`` seconds apart
(/proc/interrupts, /proc/net/softnet_stat, /proc/schedstat, the scheduler debug file, ``ethtool -S`` of each
NIC), with numaforge.hostos.read's marker format; ``parse_audit`` splits it and ``findings_of`` applies the pure
rules of numaforge.audit.rules. ``hostos_root`` (inventory var) prefixes every path, as for the host OS pipeline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatch

from .. import budget
from ..defaults import AUDIT_WINDOW
from ..errors import NumaforgeError
from ..facts.captures import parse_cpulist
from ..fleet import FleetOutcome, Rollout, run_fleet
from ..hostos.read import (
    BASE_FILES,
    MARK,
    PCI_DIR,
    HostState,
    Snapshot,
    host_state,
    parse_interrupts,
    parse_snapshot,
    snapshot_script,
    unexpected_content,
)
from ..hostos.run import bios_nps, host_root
from ..remote.errors import CommandTimeout
from ..remote.ssh import connect
from ..report import HostResult
from . import rules
from .parse import (
    PciPlacement,
    ProcStatus,
    SchedDebug,
    Vma,
    kernel_release,
    parse_ethtool_stats,
    parse_numa_maps,
    parse_pci_links,
    parse_sched_debug,
    parse_schedstat,
    parse_softnet,
    parse_status,
)

SYSCTLS = ["vm.zone_reclaim_mode", "kernel.numa_balancing"]
SCHED_FILES = ["/proc/sched_debug", "/sys/kernel/debug/sched/debug"]  # 5.10 (CONFIG_SCHED_DEBUG); 5.13+ debugfs
SAMPLE_FILES = ["/proc/interrupts", "/proc/net/softnet_stat", "/proc/schedstat", *SCHED_FILES]
ONCE_FILES = [
    "/proc/sys/vm/zone_reclaim_mode",
    "/proc/sys/kernel/numa_balancing",
    "/proc/sys/kernel/osrelease",
    *[f for f in BASE_FILES if f not in ("/proc/interrupts", "/proc/vmstat")],
    f"{PCI_DIR}/*/numa_node",
    f"{PCI_DIR}/*/class",
    f"{PCI_DIR}/*/local_cpulist",
    f"{PCI_DIR}/*/current_link_speed",
    f"{PCI_DIR}/*/current_link_width",
    "/sys/class/net/*/device/local_cpulist",
    "/proc/[0-9]*/status",
    "/proc/[0-9]*/numa_maps",
    "/proc/[0-9]*/cpuset",
]
# each process's cpuset cgroup (/proc/PID/cpuset): its effective CPUs and nodes, cgroup v2 then v1 file names
CGROUP_FILES = (
    "/sys/fs/cgroup{}/cpuset.cpus.effective",
    "/sys/fs/cgroup{}/cpuset.mems.effective",
    "/sys/fs/cgroup/cpuset{}/cpuset.effective_cpus",
    "/sys/fs/cgroup/cpuset{}/cpuset.effective_mems",
)
ETHTOOL = "ethtool -S "
PCI_LINKS = "ls -l " + PCI_DIR
_SAMPLE = re.compile(r"^@@@ sample (\d)$", re.M)


@dataclass
class AuditOptions:
    window: float = AUDIT_WINDOW
    process: str | None = None  # glob on /proc/PID/status Name
    accept_new_host_key: bool = False


def _shows(root: str, files: list[str]) -> list[str]:
    return snapshot_script(root, files, []).splitlines()[3:-1]  # the show lines, without header and exit


def audit_script(root: str, window: float) -> str:
    head = snapshot_script(root, ONCE_FILES, []).splitlines()[:-1]
    cg = " ".join(f'"$R"{f.format(chr(34) + "${c%/}" + chr(34))}' for f in CGROUP_FILES)  # the path quoted: data
    head.append(f'cat "$R"/proc/[0-9]*/cpuset 2>/dev/null | sort -u | while IFS= read -r c; do show {cg}; done')
    head.append(f'for d in "$R"{PCI_DIR}/*/msi_irqs; do list "$d"; done')
    head.append(f'[ -d "$R"{PCI_DIR} ] && {{ echo "{MARK} file {PCI_LINKS}"; ls -l "$R"{PCI_DIR}; echo; }}')
    # ethtool runs on the audited host, not on the build server (scripts/setup.sh cannot install it there): a
    # host without it, or an offline snapshot ($R set), only loses the per-NIC no-buffer drop counters; the
    # softnet_stat drop and squeeze checks read /proc and still run
    ethtool = (
        'if [ -z "$R" ] && command -v ethtool >/dev/null 2>&1; then for i in /sys/class/net/*; do n=${i##*/}; '
        f'[ "$n" = lo ] && continue; echo "@@@ file {ETHTOOL}$n"; ethtool -S "$n" 2>/dev/null; echo; done; fi'
    )
    lines = [*head]
    for s in (1, 2):
        lines += [f'echo "@@@ sample {s}"', *_shows(root, SAMPLE_FILES), ethtool]
        if s == 1:
            lines.append(f"sleep {window:g}")
    lines.append("exit 0")
    return "\n".join(lines) + "\n"


@dataclass
class AuditInput:
    once: Snapshot
    samples: list[Snapshot] = field(default_factory=list)


def parse_audit(text: str) -> AuditInput:
    parts = _SAMPLE.split(text)
    # parts: [once, "1", sample1, "2", sample2]
    if len(parts) != 5:
        raise ValueError(f"expected 2 samples in the audit output, found {(len(parts) - 1) // 2}")
    return AuditInput(parse_snapshot(parts[0]), [parse_snapshot(parts[2]), parse_snapshot(parts[4])])


_PROC = re.compile(r"^/proc/(\d+)/(status|numa_maps|cpuset)$")
_NETCPUS = re.compile(r"^/sys/class/net/([^/]+)/device/local_cpulist$")
_PCINODE = re.compile(rf"^{PCI_DIR}/([^/]+)/numa_node$")


def _parsed(s: Snapshot, path: str, parser):
    """parser(text of path), or None when the host has no such file; a shape error names the file."""
    if path not in s.files:
        return None
    try:
        return parser(s.files[path])
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _sched(s: Snapshot) -> tuple[SchedDebug | None, str]:
    for p in SCHED_FILES:
        if s.files.get(p, "").strip():
            return _parsed(s, p, parse_sched_debug), p
    return None, ""


def _processes(once: Snapshot, pattern: str | None) -> list[tuple[ProcStatus, list[Vma]]]:
    got: dict[str, dict[int, str]] = {"status": {}, "numa_maps": {}, "cpuset": {}}
    for path, text in once.files.items():
        if m := _PROC.match(path):
            got[m.group(2)][int(m.group(1))] = text
    status, maps = got["status"], got["numa_maps"]
    out = []
    for pid, text in sorted(status.items()):
        try:
            st = parse_status(pid, text)
        except ValueError:
            continue  # a process that exited between the glob and the read
        if pattern and not fnmatch(st.name, pattern):
            continue
        out.append((st, parse_numa_maps(maps.get(pid, ""))))
        st.cgroup = _cgroup(once, got["cpuset"].get(pid, "").strip())
    return out


def _cgroup(once: Snapshot, path: str) -> dict[str, str]:
    """The cpuset cgroup's effective CPUs and nodes: {"path", "cpus", "mems", "cpus_file", "mems_file"} ({} if
    unreadable)."""
    if not path:
        return {}
    base = path.rstrip("/")
    for cpus_f, mems_f in (CGROUP_FILES[:2], CGROUP_FILES[2:]):
        c, m = cpus_f.format(base), mems_f.format(base)
        if c in once.files and m in once.files:
            return {
                "path": path,
                "cpus": once.files[c].strip(),
                "mems": once.files[m].strip(),
                "cpus_file": c,
                "mems_file": m,
            }
    return {}


_MSI = re.compile(rf"^{PCI_DIR}/([^/]+)/msi_irqs$")


def _msi_owner(once: Snapshot) -> dict[str, str]:
    """IRQ -> the PCI address whose msi_irqs/ lists it."""
    return {irq: m.group(1) for d, irqs in once.dirs.items() if (m := _MSI.match(d)) for irq in irqs}


def _pci_devices(once: Snapshot) -> list[PciPlacement]:
    f = once.files
    out = []
    for addr, (rc, port) in sorted(parse_pci_links(f.get(PCI_LINKS, "")).items()):
        d = f"{PCI_DIR}/{addr}"
        speed, width = f.get(f"{d}/current_link_speed", "").strip(), f.get(f"{d}/current_link_width", "").strip()
        link = f"{speed} x{width}" if speed and width else ""
        out.append(PciPlacement(addr, port, rc, f.get(f"{d}/class", "").strip(), link))
    return out


def findings_of(
    data: AuditInput, window: float, process: str | None = None, nps: int | None = None, sockets: int | None = None
) -> tuple[list[rules.Finding], dict]:
    """The pure part of an audit: parsed snapshot -> (findings, facts shown with them)."""
    once, (a, b) = data.once, data.samples
    state: HostState = host_state(once, SYSCTLS)
    nodes = state.nodes
    release_text = once.files.get("/proc/sys/kernel/osrelease", "").strip()
    release = kernel_release(release_text)
    out: list[rules.Finding] = []
    sa, src = _sched(a)
    sb, _ = _sched(b)
    if release and release >= (5, 13):
        why = "no /sys/kernel/debug/sched/debug (debugfs not mounted, or not readable without root)"
    else:
        why = "no /proc/sched_debug (kernel built without CONFIG_SCHED_DEBUG, or not readable)"
    out += rules.sched_imbalance(sa, sb, window, nodes, src, why)
    ssa, ssb = (_parsed(s, "/proc/schedstat", parse_schedstat) for s in (a, b))
    out += rules.schedstat_note(ssa, ssb, window)
    out += rules.cpuset_membind(_processes(once, process), nodes, release, state.sysctls.get("kernel.numa_balancing"))
    local = {}
    for path, text in once.files.items():
        if (m := _NETCPUS.match(path)) and text.strip():
            local[m.group(1)] = parse_cpulist(text)
    ncpus = len(rules.node_of(nodes)) or 1
    ia, ib = (parse_interrupts(s.files.get("/proc/interrupts", "")) for s in (a, b))
    # IRQs not named after an interface (virtio2-input.0): the PCI device whose msi_irqs/ lists them
    for irq, addr in _msi_owner(once).items():
        cpus_text = once.files.get(f"{PCI_DIR}/{addr}/local_cpulist", "").strip()
        dev = rules.device_of(ib[irq]) if irq in ib else None
        if dev and cpus_text and dev not in local:
            local[dev] = parse_cpulist(cpus_text)
    out += rules.irq_placement(
        ia,
        ib,
        window,
        local,
        ncpus,
        state.affinity,
    )
    sn = [_parsed(s, "/proc/net/softnet_stat", parse_softnet) for s in (a, b)]
    out += rules.softnet(sn[0], sn[1], window)
    eth = [
        {p[len(ETHTOOL) :]: parse_ethtool_stats(t) for p, t in s.files.items() if p.startswith(ETHTOOL)} for s in (a, b)
    ]
    out += rules.nic_counters(eth[0], eth[1], window)
    pci: dict[str, int | None] = {}
    for path, text in once.files.items():
        if m := _PCINODE.match(path):
            try:
                pci[m.group(1)] = int(text.strip())
            except ValueError:
                raise ValueError(f"{path}: not a number: {text.strip()!r}") from None
    out += rules.host_os(state, nodes, pci)
    pci_local = {
        a: parse_cpulist(once.files[f"{PCI_DIR}/{a}/local_cpulist"])
        for a in pci
        if once.files.get(f"{PCI_DIR}/{a}/local_cpulist", "").strip()
    }
    out += rules.node_layout(nodes, pci, pci_local, nps, sockets)
    out += rules.shared_root_ports(_pci_devices(once))
    facts = {"kernel": release_text, "nodes": {str(n): c for n, c in sorted(nodes.items())}, "sched_debug": src or None}
    return out, facts


READ_MARGIN = 120.0  # seconds the audit read may take beyond its --window sleep (the /proc and /sys reads)


def _read(remote, host, opts: AuditOptions):
    """The audit script's one SSH command, bounded by --window + READ_MARGIN and by what is left of the host's
    --host-timeout; a stop names the option that sets the bound that fired."""
    limit = opts.window + READ_MARGIN
    left = budget.remaining()
    timeout = limit if left is None else max(0.1, min(limit, left))
    try:
        return remote.run(
            "sh -s",
            stdin=audit_script(host_root(host), opts.window),
            timeout=timeout,
            sudo=bool(host.ssh.sudo),
            check=False,
        )
    except CommandTimeout:
        if left is not None and left < limit:
            raise budget.HostTimeout(
                f"the audit read (a --window {opts.window:g} s sleep between two samples) was stopped when the "
                f"host's --host-timeout ran out ({max(0.0, left):.0f} s were left when it started)",
                f"host {host.name}",
                f"raise --host-timeout above --window {opts.window:g} plus the reads (a few seconds), or lower --window",
            ) from None
        raise NumaforgeError(
            f"the audit read did not finish within {limit:g} s (--window {opts.window:g} s + {READ_MARGIN:g} s for "
            "the reads); it was stopped",
            f"host {host.name}",
            "find what blocks on the host (a /proc or /sys read, or sudo); --host-timeout bounds the read sooner",
        ) from None


def audit_host(host, opts: AuditOptions) -> HostResult:
    res = HostResult(host.name)
    with connect(host.ssh, host.name, accept_new_host_key=opts.accept_new_host_key) as remote:
        with res.step("read") as s:
            s.detail = {"window_seconds": opts.window}
            r = _read(remote, host, opts)
    if r.rc != 0:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise NumaforgeError(
            f"reading the host's NUMA state failed (exit {r.rc}): {tail}",
            host.name,
            "check that /proc and /sys are mounted and the login shell can run sh",
        )
    with res.step("audit"):
        try:
            findings, facts = findings_of(
                parse_audit(r.stdout), opts.window, opts.process, bios_nps(host), host.hardware.sockets
            )
        except ValueError as exc:
            raise unexpected_content(exc, host.name) from None
    res.status, res.message = rules.status(findings)
    res.data.update({"findings": [f.as_dict() for f in findings], **facts})
    return res


def audit_fleet(hosts, opts: AuditOptions, rollout: Rollout | None = None, *, progress: bool = True) -> FleetOutcome:
    no_ssh = [h.name for h in hosts if h.ssh is None]
    if no_ssh:
        raise NumaforgeError(
            f"host(s) without an ssh section: {', '.join(no_ssh)}",
            "inventory",
            "add ssh: {address: ...} to each host numa-audit should read",
        )
    return run_fleet(hosts, lambda h: audit_host(h, opts), rollout, progress=progress)
