"""The 4-NUMA-node lab VM: qemu (TCG) booting a 5.10 kernel with the project's initramfs.

Lifecycle: ``up(kernel=..., state_dir=...) -> VMInfo``, ``status(state_dir) -> VMStatus``, ``down(state_dir)``.
State lives in ``state_dir`` (default numaforge.paths.lab_state_dir(): per user and project, under
$XDG_STATE_HOME/numaforge)::

    vm/pid  vm/vm.json  vm/serial.log  vm/qemu.log  vm/initramfs.cpio  vm/dropbear_ed25519_host_key
    ssh/id_ed25519  ssh/id_ed25519.pub  ssh/known_hosts

Kernels (``--kernel``): ``lab`` (the kpatch helper's 5.10.262 lab build, numaforge.kernel.kpatch.lab_kernel())
and ``debian`` (Debian bullseye's 5.10.0-46-amd64 = 5.10.262-1, extracted into the cache with its headers, so
out-of-tree livepatch modules can be built against it with gcc-10).

qemu shape (``topology``, TOPOLOGIES): one 512M RAM backend and one ``-numa node`` per NUMA node, one CPU (a
socket) per node that has CPUs, a SLIT from ``-numa dist``; user networking restricted to one host forward on
127.0.0.1. Topologies:

- ``backplane4`` (default): 4 nodes, SLIT 16 within a pair (0-1, 2-3) and 32 across (the kernel classifies it
  NUMA_BACKPLANE);
- ``nps2``: an EPYC-like 2-socket NPS2 machine, 4 nodes, 10 local, 12 within a socket, 32 across sockets;
- ``cpuless4``: the backplane4 SLIT with node 3 memory-only (no CPU), like a CXL/PMEM node;
- ``2node``: 2 nodes, SLIT 32 (no third node: the control where the scheduler change cannot act).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import paths
from ..errors import ToolMissingError
from ..inventory.model import SSHSpec
from ..paths import cache_dir
from ..program import prog
from ..workload import workload_binary
from . import initramfs
from .kernels import (  # noqa: F401  (vm.<name> for callers)
    DEBIAN_ABI,
    DEBIAN_VERSION,
    BootKernel,
    LabVMError,
    build_module,
    debian_kernel,
    debian_kernel_root,
    lab_kernel,
    resolve_kernel,
    run_checked,
)

DEFAULT_SSH_PORT = 2222
NODES = 4  # nodes of the default topology
NODE_MEM_MB = 512
NUMA_NIC_NODE = 1  # the node the optional virtio-net NIC's expander bridge belongs to
# random.trust_cpu=on + an RDRAND CPU: the crng is ready at boot, so dropbear does not block on getrandom()
# no_timer_check: under TCG on a loaded host the kernel's IO-APIC timer check can time out and panic the boot
# ("IO-APIC + timer doesn't work", seen booting the cpuless4 topology while two other VMs ran); the emulated
# timer works, the check is what fails
APPEND = "nokaslr numa_balancing=enable console=ttyS0 panic=-1 random.trust_cpu=on no_timer_check"


@dataclass(frozen=True)
class Topology:
    """A NUMA shape for the lab VM: CPUs per node and the SLIT (distances[a][b], 10 on the diagonal)."""

    name: str
    cpus: tuple[int, ...]  # CPUs of node 0, 1, ...; 0 = a memory-only node
    distances: tuple[tuple[int, ...], ...]
    note: str = ""

    @property
    def nodes(self) -> int:
        return len(self.cpus)

    def scaled(self, cpus_per_node: int) -> "Topology":
        """The same shape with cpus_per_node CPUs on every node that has CPUs (memory-only nodes stay so)."""
        if cpus_per_node < 1:
            raise LabVMError(f"cpus per node must be >= 1, not {cpus_per_node}", "--cpus-per-node", "use 1 or 2")
        return Topology(self.name, tuple(c * cpus_per_node for c in self.cpus), self.distances, self.note)

    @property
    def ncpus(self) -> int:
        return sum(self.cpus)


def _slit(n: int, dist) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(10 if a == b else dist(a, b) for b in range(n)) for a in range(n))


TOPOLOGIES = {
    "backplane4": Topology(
        "backplane4",
        (1, 1, 1, 1),
        _slit(4, lambda a, b: 16 if a // 2 == b // 2 else 32),
        "4 nodes, SLIT 16 within a pair, 32 across (NUMA_BACKPLANE)",
    ),
    "nps2": Topology(
        "nps2",
        (1, 1, 1, 1),
        _slit(4, lambda a, b: 12 if a // 2 == b // 2 else 32),
        "2-socket EPYC-like NPS2: 4 nodes, 12 within a socket, 32 across",
    ),
    "cpuless4": Topology(
        "cpuless4",
        (1, 1, 1, 0),
        _slit(4, lambda a, b: 16 if a // 2 == b // 2 else 32),
        "backplane4 SLIT, node 3 memory-only (no CPU)",
    ),
    "2node": Topology("2node", (1, 1), _slit(2, lambda a, b: 32), "2 nodes, SLIT 32: no third node (control)"),
}
DEFAULT_TOPOLOGY = "backplane4"


def topology(name: str | Topology) -> Topology:
    if isinstance(name, Topology):
        return name
    if name not in TOPOLOGIES:
        raise LabVMError(f"unknown lab VM topology '{name}'", "--topology", f"use one of: {', '.join(TOPOLOGIES)}")
    return TOPOLOGIES[name]


@dataclass
class VMInfo:
    pid: int
    ssh_port: int
    kernel: str
    release: str
    nodes: int
    state_dir: str
    serial_log: str
    boot_seconds: float  # qemu start -> ready line
    ssh_seconds: float  # qemu start -> SSH banner
    already_running: bool = False
    topology: str = DEFAULT_TOPOLOGY
    persist: bool = False  # the persistent disk is mounted (what survives reboot())


@dataclass
class VMStatus:
    running: bool
    pid: int | None = None
    ssh_port: int | None = None
    kernel: str | None = None
    release: str | None = None
    serial_log: str | None = None


# ---------------------------------------------------------------------------------------------- keys


def lab_ssh(state_dir: Path, ssh_port: int) -> SSHSpec:
    """How to reach the VM booted with ``state_dir``: root at 127.0.0.1:``ssh_port`` with the client key and
    known_hosts ensure_keys() wrote there, no ssh-agent."""
    return SSHSpec(
        "127.0.0.1",
        ssh_port,
        "root",
        key_file=str(state_dir / "ssh" / "id_ed25519"),
        use_agent=False,
        known_hosts=str(state_dir / "ssh" / "known_hosts"),
    )


def ensure_keys(state_dir: Path, ssh_port: int) -> tuple[Path, Path]:
    """Client key (.lab/ssh/id_ed25519), dropbear host key, and a known_hosts naming 127.0.0.1:port.

    Keys are generated once and reused, so known_hosts stays valid across boots.
    """
    initramfs.require_tools()
    ssh = state_dir / "ssh"
    vm = state_dir / "vm"
    ssh.mkdir(parents=True, exist_ok=True, mode=0o700)
    vm.mkdir(parents=True, exist_ok=True)
    client = ssh / "id_ed25519"
    if not client.exists():
        run_checked(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "numaforge-lab", "-f", str(client)],
            str(client),
            "remove the partial key files and retry",
        )
    host_key = vm / "dropbear_ed25519_host_key"
    if not host_key.exists():
        run_checked(["dropbearkey", "-t", "ed25519", "-f", str(host_key)], str(host_key), "remove it and retry")
    pub = run_checked(["dropbearkey", "-y", "-f", str(host_key)], str(host_key), "remove it and retry").stdout
    line = next((ln for ln in pub.splitlines() if ln.startswith("ssh-ed25519 ")), None)
    if line is None:
        raise LabVMError("dropbearkey printed no ssh-ed25519 public key", str(host_key), "remove it and retry")
    key_type, key_b64 = line.split()[:2]
    known = ssh / "known_hosts"
    entry = f"[127.0.0.1]:{ssh_port} {key_type} {key_b64}\n"
    if not known.exists() or known.read_text() != entry:
        known.write_text(entry)
    return client, host_key


# ---------------------------------------------------------------------------------------------- qemu


def qemu_command(
    kernel: BootKernel,
    initrd: Path,
    serial_log: Path,
    ssh_port: int,
    topo: str | Topology = DEFAULT_TOPOLOGY,
    persist_disk: Path | None = None,
    numa_nic: bool = False,
) -> list[str]:
    """The qemu-system-x86_64 command line (pure).

    ``topo``: the NUMA shape (TOPOLOGIES, or a Topology, e.g. scaled to more CPUs per node).
    ``persist_disk``: an ext4 image attached as virtio-blk; the init keeps the host OS pipeline's files on it
    (numaforge.lab.initramfs.PERSIST_DIRS) so they survive a reboot. ``numa_nic``: a second NIC, virtio-net
    (MSI-X IRQs), behind a PCI expander bridge with numa_node=1 (``pxb``), so the guest's sysfs reports a
    device local to node 1 like a NIC on an EPYC root complex; its netdev has no forwards at all.
    """
    tp = topology(topo)
    cmd = [
        "qemu-system-x86_64",
        "-accel",
        "tcg",
        "-cpu",
        "qemu64,+rdrand",
        "-m",
        f"{tp.nodes * NODE_MEM_MB}M",
        "-smp",
        f"{tp.ncpus},sockets={tp.ncpus},cores=1,threads=1",
    ]
    cpu = 0
    for n, k in enumerate(tp.cpus):
        cmd += ["-object", f"memory-backend-ram,id=mem{n},size={NODE_MEM_MB}M"]
        cpus = f",cpus={cpu}" if k == 1 else (f",cpus={cpu}-{cpu + k - 1}" if k > 1 else "")
        cmd += ["-numa", f"node,nodeid={n}{cpus},memdev=mem{n}"]
        cpu += k
    for a in range(tp.nodes):
        for b in range(a + 1, tp.nodes):
            cmd += ["-numa", f"dist,src={a},dst={b},val={tp.distances[a][b]}"]
    cmd += [
        "-kernel",
        str(kernel.image),
        "-initrd",
        str(initrd),
        "-append",
        APPEND,
        "-display",
        "none",
        "-vga",
        "none",
        "-monitor",
        "none",
        "-serial",
        f"file:{serial_log}",
        "-netdev",
        f"user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{ssh_port}-:22",
        "-device",
        "e1000,netdev=n0",
        "-no-reboot",
    ]
    if numa_nic:
        cmd += [
            "-device",
            f"pxb,id=pxb1,bus_nr=32,numa_node={NUMA_NIC_NODE},bus=pci.0",
            "-netdev",
            "user,id=n1,restrict=on",
            "-device",
            "virtio-net-pci,netdev=n1,bus=pxb1,addr=0x4",
        ]
    if persist_disk is not None:
        cmd += [
            "-drive",
            f"file={persist_disk},if=none,id=persist,format=raw,cache=writeback",
            "-device",
            "virtio-blk-pci,drive=persist,bus=pci.0",
        ]
    return cmd


def irqbalance_binary() -> Path:
    """Debian's irqbalance (1.9.2), extracted -- not installed, so it never runs on this build server -- into
    the cache by scripts/setup.d/47-hostos.sh; the numa_nic VM carries it for the host OS tests."""
    p = cache_dir() / "hostos" / "irqbalance" / "usr" / "sbin" / "irqbalance"
    if not p.is_file():
        raise ToolMissingError("irqbalance is not in the cache", str(p), "run scripts/setup.d/47-hostos.sh")
    return p


def ensure_persist_disk(path: Path, size_mb: int = 32) -> Path:
    """An ext4 image for the guest's persistent files (created once, kept across boots of this state dir)."""
    if path.exists():
        return path
    if shutil.which("mkfs.ext4") is None and not Path("/usr/sbin/mkfs.ext4").exists():
        raise ToolMissingError("mkfs.ext4 is not installed", None, "install e2fsprogs")
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.truncate(size_mb * 1024 * 1024)
    mkfs = shutil.which("mkfs.ext4") or "/usr/sbin/mkfs.ext4"
    run_checked([mkfs, "-q", "-F", "-L", "nfpersist", str(tmp)], "lab VM persistent disk", "install e2fsprogs")
    os.replace(tmp, path)
    return path


def port_free(port: int) -> bool:
    """True when nothing listens on 127.0.0.1:port (a bind test, as qemu's forward and the simulator bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _alive(pid: int, state_dir: Path) -> bool:
    """pid is a qemu we started for this state dir (guards against pid reuse)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return (
        bool(cmdline)
        and cmdline[0].endswith(b"qemu-system-x86_64")
        and any(str(state_dir.resolve()).encode() in part for part in cmdline)
    )


def serial_tail(state_dir: Path, lines: int = 30) -> str:
    p = Path(state_dir) / "vm" / "serial.log"
    if not p.exists():
        return "(no serial log)"
    return "\n".join(p.read_text(errors="replace").splitlines()[-lines:])


def parse_ready(text: str) -> dict | None:
    """The init's ready line -> {'release':..., 'nodes': int, 'livepatch': bool}, or None if not yet printed.

    Only complete lines count: the serial log is read while the guest writes it, and a half-written ready line
    ("... release=5.10" without nodes=) once failed a boot with "the guest sees 0 NUMA nodes"."""
    for line in text.split("\n")[:-1]:
        if line.startswith(initramfs.READY_MARK):
            fields = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
            return {
                "release": fields.get("release", ""),
                "nodes": int(fields.get("nodes", "0") or 0),
                "livepatch": fields.get("livepatch") == "yes",
                "persist": fields.get("persist") == "yes",
            }
    return None


def _ssh_banner(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.settimeout(10)
            return s.recv(64).startswith(b"SSH-")
    except OSError:
        return False


def status(state_dir: str | os.PathLike | None = None) -> VMStatus:
    state_dir = Path(state_dir or paths.lab_state_dir())
    meta = state_dir / "vm" / "vm.json"
    pidf = state_dir / "vm" / "pid"
    if not pidf.exists():
        return VMStatus(False)
    try:
        pid = int(pidf.read_text().strip())
    except ValueError:
        return VMStatus(False)
    info = json.loads(meta.read_text()) if meta.exists() else {}
    if not _alive(pid, state_dir):
        return VMStatus(False, pid=pid)
    return VMStatus(
        True, pid, info.get("ssh_port"), info.get("kernel"), info.get("release"), str(state_dir / "vm" / "serial.log")
    )


def _already_running(state_dir: Path, tp: Topology) -> VMInfo:
    info = json.loads((state_dir / "vm" / "vm.json").read_text())
    if info.get("topology", DEFAULT_TOPOLOGY) != tp.name:
        raise LabVMError(
            f"the lab VM of {state_dir} is running with topology {info.get('topology')}, not {tp.name}",
            "--topology",
            f"stop it first (`{prog()} lab-down`) or ask for its topology",
        )
    info["already_running"] = True
    return VMInfo(**info)


def _initramfs(vm: Path, k: BootKernel, client_key: Path, host_key: Path, persist: bool, numa_nic: bool) -> Path:
    """The initramfs with the kernel's NIC (and, for persist, disk) modules, the keys and the workload."""
    modules = {}
    for rel in [*k.nic_modules, *(k.disk_modules if persist else [])]:
        modules[rel] = (k.modules_root or Path("/")) / "lib/modules" / k.release / rel
    return initramfs.build(
        vm / "initramfs.cpio",
        release=k.release,
        host_key=host_key,
        authorized_key=(client_key.with_suffix(".pub")).read_text(),
        workload=workload_binary(),
        modules=modules,
        irqbalance=irqbalance_binary() if numa_nic else None,
    )


def _wait_ready(proc, serial: Path, t0: float, boot_timeout: float, tp: Topology, fail) -> tuple[dict, float]:
    """The init's ready line on the serial console (its fields) and the seconds it took; fail() on qemu's exit,
    the timeout, an init failure or the wrong node count."""
    ready = None
    while ready is None:
        if proc.poll() is not None:
            raise fail(
                f"qemu exited with rc={proc.returncode} before the ready line",
                "read the serial/qemu logs above; check the kernel image and initramfs",
            )
        if time.monotonic() - t0 > boot_timeout:
            raise fail(
                f"no ready line on the serial console after {boot_timeout:.0f} s",
                "the machine may be overloaded; retry, or read the serial log for a panic",
            )
        time.sleep(0.5)
        text = serial.read_text(errors="replace")
        if initramfs.FAILED_MARK in text:
            raise fail("the VM's init reported a failure", "read the serial log above")
        ready = parse_ready(text)
    if ready["nodes"] != tp.nodes:
        raise fail(
            f"the guest sees {ready['nodes']} NUMA nodes, expected {tp.nodes} (topology {tp.name})",
            "the kernel needs CONFIG_NUMA and ACPI SRAT support",
        )
    return ready, time.monotonic() - t0


def up(
    kernel: str | BootKernel = "lab",
    state_dir: str | os.PathLike | None = None,
    ssh_port: int = DEFAULT_SSH_PORT,
    boot_timeout: float = 240.0,
    ssh_timeout: float = 120.0,
    topo: str | Topology = DEFAULT_TOPOLOGY,
    cpus_per_node: int = 1,
    persist: bool = False,
    numa_nic: bool = False,
) -> VMInfo:
    """Boot the lab VM (or report the one already running) and wait until SSH answers.

    ``topo``/``cpus_per_node``: the NUMA shape (TOPOLOGIES); ``persist``/``numa_nic``: see qemu_command (the
    host OS tests use both; the disk lives in state_dir/vm)."""
    state_dir = Path(state_dir or paths.lab_state_dir()).resolve()
    tp = topology(topo).scaled(cpus_per_node)
    st = status(state_dir)
    if st.running:
        return _already_running(state_dir, tp)
    if shutil.which("qemu-system-x86_64") is None:
        raise ToolMissingError("qemu-system-x86_64 is not installed", None, "run scripts/setup.d/40-lab-vm.sh")
    k = resolve_kernel(kernel)
    if not port_free(ssh_port):
        raise LabVMError(
            f"127.0.0.1:{ssh_port} is already in use",
            "lab VM ssh port",
            f"stop whatever listens there (`{prog()} lab-down`?) or choose another port",
        )
    client_key, host_key = ensure_keys(state_dir, ssh_port)
    vm = state_dir / "vm"
    initrd = _initramfs(vm, k, client_key, host_key, persist, numa_nic)
    serial = vm / "serial.log"
    serial.write_text("")
    qlog = vm / "qemu.log"
    disk = ensure_persist_disk(vm / "persist.img") if persist else None
    cmd = qemu_command(k, initrd, serial, ssh_port, tp, persist_disk=disk, numa_nic=numa_nic)
    t0 = time.monotonic()
    with open(qlog, "w") as log:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    (vm / "pid").write_text(f"{proc.pid}\n")

    def fail(what: str, fix: str) -> LabVMError:
        tail = serial_tail(state_dir)
        qemu_out = qlog.read_text(errors="replace").strip()[-600:] if qlog.exists() else ""
        _stop(proc.pid, state_dir)
        return LabVMError(
            f"{what}\n--- serial log tail ({serial}) ---\n{tail}" + (f"\n--- qemu ---\n{qemu_out}" if qemu_out else ""),
            "lab VM",
            fix,
        )

    ready, boot_s = _wait_ready(proc, serial, t0, boot_timeout, tp, fail)
    while not _ssh_banner(ssh_port):
        if proc.poll() is not None:
            raise fail(f"qemu exited with rc={proc.returncode} before SSH answered", "read the serial log above")
        if time.monotonic() - t0 > boot_s + ssh_timeout:
            raise fail("dropbear did not answer on the forwarded SSH port", "read /var/log/dropbear.log in the guest")
        time.sleep(0.5)
    info = VMInfo(
        pid=proc.pid,
        ssh_port=ssh_port,
        kernel=k.name,
        release=ready["release"],
        nodes=ready["nodes"],
        state_dir=str(state_dir),
        serial_log=str(serial),
        boot_seconds=round(boot_s, 1),
        ssh_seconds=round(time.monotonic() - t0, 1),
        topology=tp.name,
        persist=ready.get("persist", False),
    )
    (vm / "vm.json").write_text(json.dumps(asdict(info), indent=2) + "\n")
    return info


def reboot(state_dir: str | os.PathLike | None = None, wait_exit: float = 60.0) -> VMInfo:
    """Boot the VM again with the same kernel, port, topology and persistent disk. qemu runs with -no-reboot,
    so a guest `reboot -f` ends qemu: wait for that (up to wait_exit s), stop it if still up, then boot."""
    state_dir = Path(state_dir or paths.lab_state_dir()).resolve()
    info = json.loads((state_dir / "vm" / "vm.json").read_text())
    t0 = time.monotonic()
    while status(state_dir).running and time.monotonic() - t0 < wait_exit:
        time.sleep(0.5)
    down(state_dir)
    return up(
        kernel=info["kernel"],
        state_dir=state_dir,
        ssh_port=info["ssh_port"],
        topo=info.get("topology", DEFAULT_TOPOLOGY),
        persist=bool(info.get("persist")),
    )


def _stop(pid: int, state_dir: Path, grace: float = 10.0) -> bool:
    if not _alive(pid, state_dir):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _alive(pid, state_dir):
            time.sleep(0.2)
        if _alive(pid, state_dir):
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
    except ProcessLookupError:
        pass
    try:  # reap if it is our child
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    return True


def down(state_dir: str | os.PathLike | None = None) -> bool:
    """Stop the VM of this state dir; True if one was running. Leaves logs and keys in place."""
    state_dir = Path(state_dir or paths.lab_state_dir()).resolve()
    pidf = state_dir / "vm" / "pid"
    if not pidf.exists():
        return False
    try:
        pid = int(pidf.read_text().strip())
    except ValueError:
        pid = -1
    stopped = pid > 0 and _stop(pid, state_dir)
    pidf.unlink(missing_ok=True)
    (state_dir / "vm" / "vm.json").unlink(missing_ok=True)
    return stopped
