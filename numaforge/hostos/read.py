"""Read a host's OS state in one SSH command and parse it (the parsers are pure).

``snapshot_script(paths)`` is one POSIX-sh script (bash, dash, busybox sh) that prints every file it is asked
for between marker lines, plus directory listings::

    @@@ file /proc/sys/vm/zone_reclaim_mode
    0
    @@@ ls /sys/bus/pci/devices/0000:00:03.0/msi_irqs
    37
    38

``parse_snapshot(text)`` splits that into ``Snapshot(files, dirs)`` and ``host_state(snapshot, devices)`` turns
it into a typed :class:`HostState`: sysctls, transparent hugepages, cpufreq governors, NUMA nodes and their
numastat counters, /proc/vmstat NUMA counters, /proc/interrupts, every IRQ's smp_affinity_list, and for each
inventory device (PCI address) its sysfs ``numa_node``, ``local_cpulist`` and IRQs (``msi_irqs/`` or ``irq``).

Every path is read under a root prefix (``hostos_root`` in the inventory, default ``/``); only the SSH tests
set it, to a tree of captured files, because a test must not change the build server's own kernel settings.
The corpora in tests/data/hostos/ are this script's real output on real machines.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import NumaforgeError
from ..facts.captures import parse_cpulist

MARK = "@@@"
# The most of one file a snapshot reads from a host (``head -c``); a longer file is refused, never parsed cut
# short (issue 40: a 300 MB /proc/interrupts). The largest real one here: /proc/interrupts of a 384-CPU host
# with ~2000 IRQs is ~8 MiB. Remote.run's MAX_OUTPUT_BYTES (64 MiB) bounds the whole snapshot.
MAX_FILE_BYTES = 16 * 1024 * 1024
SYSCTL_DIR = "/proc/sys"
THP_DIR = "/sys/kernel/mm/transparent_hugepage"
CPU_DIR = "/sys/devices/system/cpu"
NODE_DIR = "/sys/devices/system/node"
PCI_DIR = "/sys/bus/pci/devices"

# the fixed part of every snapshot: globs are expanded on the host
BASE_FILES = [
    f"{THP_DIR}/enabled",
    f"{THP_DIR}/defrag",
    f"{CPU_DIR}/cpu[0-9]*/cpufreq/scaling_governor",
    f"{CPU_DIR}/cpu0/cpufreq/scaling_available_governors",
    f"{CPU_DIR}/online",
    f"{NODE_DIR}/online",
    f"{NODE_DIR}/node[0-9]*/cpulist",
    f"{NODE_DIR}/node[0-9]*/numastat",
    "/proc/vmstat",
    "/proc/interrupts",
    "/proc/irq/[0-9]*/smp_affinity_list",
]
WANTS_DIR = "/etc/systemd/system/multi-user.target.wants"
UNIT_NAME = "numaforge-hostos.service"


def sysctl_path(key: str) -> str:
    """vm.zone_reclaim_mode -> /proc/sys/vm/zone_reclaim_mode (the kernel's own mapping: dots are slashes)."""
    return f"{SYSCTL_DIR}/" + key.replace(".", "/")


def device_files(addr: str) -> tuple[list[str], list[str]]:
    d = f"{PCI_DIR}/{addr}"
    return [f"{d}/numa_node", f"{d}/local_cpulist", f"{d}/irq", f"{d}/class"], [f"{d}/msi_irqs"]


def snapshot_script(root: str, files: list[str], dirs: list[str]) -> str:
    """POSIX sh printing each readable file (globs allowed) and each directory listing between marker lines.
    ``root`` prefixes every path ("" or "/" = the real one); the printed names are without it."""
    r = "" if root in ("", "/") else root.rstrip("/")
    lines = [
        f"R={shlex.quote(r)}",
        f'show() {{ for f in "$@"; do [ -f "$f" ] && [ -r "$f" ] || continue; '
        f'echo "{MARK} file ${{f#$R}}"; head -c {MAX_FILE_BYTES + 1} "$f" 2>/dev/null || cat "$f" 2>/dev/null; '
        "echo; done; }",
        f'list() {{ [ -d "$1" ] || return 0; echo "{MARK} ls ${{1#$R}}"; ls -1 "$1"; }}',
    ]
    for f in files:
        # quote each path but leave the glob characters outside the quotes so the shell expands them
        glob = re.sub(r"([^*?\[\]]+)", lambda m: shlex.quote(m.group(1)), f)
        lines.append(f'show "$R"{glob}')
    for d in dirs:
        lines.append(f'list "$R"{shlex.quote(d)}')
    lines.append("exit 0")
    return "\n".join(lines) + "\n"


@dataclass
class Snapshot:
    files: dict[str, str] = field(default_factory=dict)  # path -> content (the trailing newline removed)
    dirs: dict[str, list[str]] = field(default_factory=dict)  # path -> entries


_MARK_RE = re.compile(rf"^{MARK} (file|ls) (.+)$")


def parse_snapshot(text: str) -> Snapshot:
    """The files and listings of a snapshot. A file of MAX_FILE_BYTES or more (the script reads at most one byte
    past the cap) raises ValueError naming it and the cap: it is never parsed cut short."""
    snap = Snapshot()
    kind = path = None
    buf: list[str] = []

    def flush():
        if kind == "file":
            # show() adds one newline after each file: drop it, then the file's own trailing newline
            body = "\n".join(buf)
            if len(body) >= MAX_FILE_BYTES and len(body.encode("utf-8", "replace")) >= MAX_FILE_BYTES:
                raise ValueError(
                    f"{path}: more than {MAX_FILE_BYTES} bytes (the cap for one file read from a host); "
                    "it was not parsed"
                )
            snap.files[path] = body[:-1] if body.endswith("\n") else body
        elif kind == "ls":
            snap.dirs[path] = [b for b in buf if b]

    for line in (text[:-1] if text.endswith("\n") else text).split("\n"):
        m = _MARK_RE.match(line)
        if m:
            flush()
            kind, path, buf = m.group(1), m.group(2), []
        elif kind is not None:
            buf.append(line)
    flush()
    return snap


# --------------------------------------------------------------------------------------------- parsers
def bracketed(text: str) -> tuple[str | None, list[str]]:
    """THP-style choice files: "always [madvise] never" -> ("madvise", ["always", "madvise", "never"])."""
    words = text.split()
    chosen = None
    options = []
    for w in words:
        if w.startswith("[") and w.endswith("]"):
            w = w[1:-1]
            chosen = w
        options.append(w)
    return chosen, options


def parse_keyvals(text: str) -> dict[str, int]:
    """numastat / vmstat: "name value" lines -> {name: int}; other lines are skipped."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


@dataclass
class Interrupt:
    irq: str
    counts: list[int]
    chip: str
    name: str  # the action names (driver/device), e.g. "virtio2-input.0" or "eth0"


def parse_interrupts(text: str) -> dict[str, Interrupt]:
    """/proc/interrupts -> {irq: Interrupt}; numeric IRQs only (NMI, LOC... are per-CPU, not placeable)."""
    lines = text.splitlines()
    if not lines:
        return {}
    ncpu = len(lines[0].split())
    out: dict[str, Interrupt] = {}
    for line in lines[1:]:
        head, _, rest = line.partition(":")
        irq = head.strip()
        if not irq.isdigit():
            continue
        parts = rest.split()
        counts = []
        for p in parts[:ncpu]:
            if not p.isdigit():
                break
            counts.append(int(p))
        tail = parts[len(counts) :]
        chip = tail[0] if tail else ""
        name = " ".join(tail[2:]) if len(tail) > 2 else " ".join(tail[1:])
        out[irq] = Interrupt(irq, counts, chip, name)
    return out


@dataclass
class Device:
    addr: str
    present: bool
    numa_node: int | None = None  # None: the kernel does not say (no numa_node file)
    local_cpus: list[int] = field(default_factory=list)
    irqs: list[str] = field(default_factory=list)
    pci_class: str = ""


@dataclass
class HostState:
    sysctls: dict[str, str | None] = field(default_factory=dict)  # key -> value (None: no such sysctl)
    sysctl_dirs: dict[str, list[str]] = field(default_factory=dict)  # /proc/sys/<dir> -> entries (did-you-mean)
    thp: dict[str, tuple[str | None, list[str]]] = field(default_factory=dict)  # enabled/defrag -> (chosen, options)
    governors: dict[int, str] = field(default_factory=dict)  # cpu -> scaling_governor
    available_governors: list[str] = field(default_factory=list)
    nodes: dict[int, list[int]] = field(default_factory=dict)  # node -> cpus
    numastat: dict[int, dict[str, int]] = field(default_factory=dict)
    vmstat: dict[str, int] = field(default_factory=dict)  # numa_* counters only
    interrupts: dict[str, Interrupt] = field(default_factory=dict)
    affinity: dict[str, list[int]] = field(default_factory=dict)  # irq -> smp_affinity_list
    devices: dict[str, Device] = field(default_factory=dict)
    files: dict[str, str | None] = field(default_factory=dict)  # managed files -> content (None: absent)
    unit_linked: bool = False  # numaforge-hostos.service enabled


_GOV = re.compile(rf"^{CPU_DIR}/cpu(\d+)/cpufreq/scaling_governor$")
_NODE = re.compile(rf"^{NODE_DIR}/node(\d+)/(cpulist|numastat)$")
_AFF = re.compile(r"^/proc/irq/(\d+)/smp_affinity_list$")


def host_state(
    snap: Snapshot,
    sysctls: Sequence[str] = (),
    devices: Sequence[str] = (),
    managed_files: Sequence[str] = (),
) -> HostState:
    """Typed state from a snapshot. Unparseable kernel files raise ValueError naming the file."""
    st = HostState()
    f = snap.files
    for key in sysctls:
        p = sysctl_path(key)
        st.sysctls[key] = " ".join(f[p].split()) if p in f else None
        parent = p.rsplit("/", 1)[0]
        if parent in snap.dirs:
            st.sysctl_dirs[parent] = snap.dirs[parent]
    for name in ("enabled", "defrag"):
        p = f"{THP_DIR}/{name}"
        if p in f:
            st.thp[name] = bracketed(f[p])
    avail = f.get(f"{CPU_DIR}/cpu0/cpufreq/scaling_available_governors")
    st.available_governors = avail.split() if avail else []
    for path, text in f.items():
        try:
            if m := _GOV.match(path):
                st.governors[int(m.group(1))] = text.strip()
            elif m := _NODE.match(path):
                n = int(m.group(1))
                if m.group(2) == "cpulist":
                    st.nodes[n] = parse_cpulist(text)
                else:
                    st.numastat[n] = parse_keyvals(text)
            elif m := _AFF.match(path):
                st.affinity[m.group(1)] = parse_cpulist(text)
        except ValueError as exc:
            raise ValueError(f"{path}: cannot parse {text.strip()!r}: {exc}") from None
    st.vmstat = {k: v for k, v in parse_keyvals(f.get("/proc/vmstat", "")).items() if k.startswith("numa_")}
    st.interrupts = parse_interrupts(f.get("/proc/interrupts", ""))
    for addr in devices:
        d = f"{PCI_DIR}/{addr}"
        dev = Device(addr, present=f"{d}/class" in f, pci_class=f.get(f"{d}/class", "").strip())
        if f"{d}/numa_node" in f:
            try:
                dev.numa_node = int(f[f"{d}/numa_node"].strip())
            except ValueError:
                raise ValueError(f"{d}/numa_node: not a number: {f[f'{d}/numa_node']!r}") from None
        if f.get(f"{d}/local_cpulist", "").strip():
            dev.local_cpus = parse_cpulist(f[f"{d}/local_cpulist"])
        msi = snap.dirs.get(f"{d}/msi_irqs") or []
        if msi:
            dev.irqs = sorted((i for i in msi if i.isdigit()), key=int)
        elif f.get(f"{d}/irq", "0").strip() not in ("", "0"):
            dev.irqs = [f[f"{d}/irq"].strip()]  # legacy INTx (e.g. e1000 in the lab VM)
        st.devices[addr] = dev
    st.unit_linked = UNIT_NAME in snap.dirs.get(WANTS_DIR, [])
    for p in managed_files:
        st.files[p] = f[p] + "\n" if p in f else None
    return st


def snapshot_request(sysctls: list[str], devices: list[str], managed_files: list[str]) -> tuple[list[str], list[str]]:
    """(files, dirs) a snapshot must read for these sysctls, devices and managed files."""
    files = [sysctl_path(k) for k in sysctls] + list(BASE_FILES) + list(managed_files)
    dirs = sorted({sysctl_path(k).rsplit("/", 1)[0] for k in sysctls}) + [WANTS_DIR]
    for addr in devices:
        fs, ds = device_files(addr)
        files += fs
        dirs += ds
    return files, dirs


def take_snapshot(
    runner,
    root: str,
    sysctls: Sequence[str],
    devices: Sequence[str],
    managed_files: Sequence[str] = (),
    timeout: float = 60,
) -> str:
    """Run the snapshot script on the host (``sh -s``, the script on stdin so errors name a short command)."""
    files, dirs = snapshot_request(list(sysctls), list(devices), list(managed_files))
    # a read: a stop request cuts it at once (stop_grace=0)
    r = runner.run("sh -s", stdin=snapshot_script(root, files, dirs), timeout=timeout, check=False, stop_grace=0)
    if r.rc != 0:
        from ..errors import NumaforgeError

        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise NumaforgeError(
            f"reading the host's OS state failed (exit {r.rc}): {tail}",
            getattr(runner, "where", "host"),
            "check that /proc and /sys are mounted on the host",
        )
    return r.stdout


def unexpected_content(exc: ValueError, host: str) -> NumaforgeError:
    """A kernel file whose content a parser did not expect: the host's error, never a guess."""
    return NumaforgeError(
        f"unexpected kernel file content: {exc}", host, "report it with the file's content; numaforge does not guess"
    )
