"""Collect raw captures from a host: read-only commands, nothing installed, nothing written on the host.

    caps = collect_ssh(host)          # over numaforge.remote.ssh (strict host keys)
    caps = collect_local()            # this build server, same commands through `sh -c`

Every capture is one POSIX-sh command (works with bash, dash and busybox sh). A missing tool (exit 127 from the
`command -v` guard), a missing sysfs entry (exit 3 from the existence guard), a failure or a timeout becomes
``Captures.absent[name] = reason``; only a lost connection aborts the host. ``lspci`` runs through sudo when the
inventory says ``ssh.sudo: true`` (without root it cannot read capabilities: ACS/ASPM become "cannot tell").
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from typing import Protocol

from . import captures as C
from .captures import Captures

_PATH = 'PATH="$PATH:/usr/sbin:/sbin:/usr/local/sbin"; export PATH; '
EXIT_NO_TOOL = 127
EXIT_NO_FILES = 3


def _tool(tool: str, argv: str) -> str:
    return f"{_PATH}command -v {tool} >/dev/null 2>&1 || exit {EXIT_NO_TOOL}; exec {argv}"


def _head(patterns: list[str], lines: int = 64) -> str:
    pats = " ".join(patterns)
    return (f'files=; for f in {pats}; do [ -e "$f" ] && files="$files $f"; done; '
            f'[ -n "$files" ] || exit {EXIT_NO_FILES}; exec head -v -n {lines} $files')


def _dir(path: str, argv: str) -> str:
    return f"[ -d {path} ] || exit {EXIT_NO_FILES}; exec {argv}"


@dataclass(frozen=True)
class Spec:
    name: str           # capture (corpus file) name
    command: str        # the sh command
    what: str           # human name of the tool/source, for reasons
    hint: str           # what to install/enable on the host to get it
    sudo: bool = False  # needs root for the full picture
    timeout: float = 60


NODE = "/sys/devices/system/node"
CPU = "/sys/devices/system/cpu/cpu[0-9]*"
PCI = "/sys/bus/pci/devices/*"

SPECS: list[Spec] = [
    Spec(C.LSPCI, _tool("lspci", "lspci -vvv -D -nn"), "lspci", "install pciutils on the host", sudo=True),
    Spec(C.LSPCI_TREE, _tool("lspci", "lspci -t -D"), "lspci", "install pciutils on the host"),
    Spec(C.NUMACTL, _tool("numactl", "numactl --hardware"), "numactl", "install numactl on the host"),
    Spec(C.LSCPU, _tool("lscpu", "lscpu"), "lscpu", "install util-linux on the host"),
    Spec(C.CPUINFO, "exec head -n 40 /proc/cpuinfo", "/proc/cpuinfo", "mount /proc"),
    Spec(C.UNAME, "exec uname -r", "uname", "install coreutils on the host"),
    Spec(C.SYS_NODE, _head([f"{NODE}/online", f"{NODE}/possible", f"{NODE}/node[0-9]*/cpulist",
                            f"{NODE}/node[0-9]*/distance", f"{NODE}/node[0-9]*/meminfo"]),
         "NUMA node sysfs", "a kernel with CONFIG_NUMA and /sys mounted"),
    Spec(C.SYS_CPU, _head([f"{CPU}/topology/physical_package_id", f"{CPU}/topology/thread_siblings_list",
                           f"{CPU}/cache/index3/level", f"{CPU}/cache/index3/shared_cpu_list"]),
         "CPU topology sysfs", "/sys mounted"),
    Spec(C.SYS_PCI, _head([f"{PCI}/class", f"{PCI}/vendor", f"{PCI}/device", f"{PCI}/numa_node",
                           f"{PCI}/sriov_totalvfs"]), "PCI sysfs", "a kernel with PCI and /sys mounted"),
    Spec(C.PCI_LINKS, _dir("/sys/bus/pci/devices", "ls -l /sys/bus/pci/devices/"), "PCI sysfs",
         "a kernel with PCI and /sys mounted"),
    Spec(C.IOMMU_GROUPS, _dir("/sys/kernel/iommu_groups", "ls -1 /sys/kernel/iommu_groups"),
         "/sys/kernel/iommu_groups", "a kernel with IOMMU support (CONFIG_IOMMU_API)"),
    Spec(C.PROC_KERNEL, _head(["/proc/cmdline", "/proc/sys/kernel/osrelease", "/proc/sys/kernel/tainted",
                               "/proc/sys/kernel/numa_balancing", "/sys/kernel/livepatch/*/enabled",
                               "/sys/kernel/livepatch/*/transition"]), "/proc kernel files", "mount /proc"),
]


class Runner(Protocol):
    def run(self, command: str, timeout: float | None = 30, sudo: bool = False, check: bool = True): ...


@dataclass
class Outcome:
    rc: int
    stdout: str
    stderr: str


class LocalRunner:
    """Runs the capture commands on this machine with /bin/sh (for the build server's own corpus)."""

    where = "this build server"

    def run(self, command: str, timeout: float | None = 30, sudo: bool = False, check: bool = False) -> Outcome:
        try:
            p = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=timeout,
                               errors="replace")
        except subprocess.TimeoutExpired as exc:
            raise _LocalTimeout(timeout) from exc
        return Outcome(p.returncode, p.stdout, p.stderr)


class _LocalTimeout(Exception):
    def __init__(self, timeout):
        self.timeout = timeout


def _reason(spec: Spec, rc: int, stderr: str) -> str:
    if rc == EXIT_NO_TOOL:
        return f"{spec.what} is not installed on the host; {spec.hint} to get these facts (numaforge installs nothing)"
    if rc == EXIT_NO_FILES:
        return f"{spec.what} is not there on the host ({spec.hint})"
    tail = (stderr.strip().splitlines() or ["no output"])[-1]
    return f"`{_short(spec)}` exited {rc}: {tail}"


def _short(spec: Spec) -> str:
    return spec.command.split("exec ", 1)[-1] if "exec " in spec.command else spec.command


def collect(runner: Runner, source: str, sudo: bool = False, specs: list[Spec] | None = None) -> Captures:
    """Run every capture command through ``runner``; failures become absent reasons (never an exception,
    except a lost SSH connection, which fails the whole host)."""
    from ..remote.ssh import CommandTimeout, SudoError

    cap = Captures(source=source)
    for spec in specs or SPECS:
        cap.commands[spec.name] = spec.command
        try:
            r = runner.run(spec.command, timeout=spec.timeout, sudo=bool(sudo and spec.sudo), check=False)
        except (CommandTimeout, _LocalTimeout) as exc:
            cap.absent[spec.name] = f"`{_short(spec)}` did not finish within {getattr(exc, 'timeout', spec.timeout):g} s"
            continue
        except SudoError as exc:
            cap.absent[spec.name] = f"`{_short(spec)}` needs root and sudo refused: {exc.what}"
            continue
        if r.rc == 0 or (r.stdout.strip() and r.rc not in (EXIT_NO_TOOL, EXIT_NO_FILES)):
            cap.files[spec.name] = r.stdout
            if r.rc != 0 or _real_stderr(r.stderr):
                cap.warnings[spec.name] = f"exit {r.rc}: {r.stderr.strip()[-500:]}" if r.rc else r.stderr.strip()[-500:]
        else:
            cap.absent[spec.name] = _reason(spec, r.rc, r.stderr)
    return cap


def _real_stderr(err: str) -> bool:
    # lspci on hosts without kmod data prints a harmless libkmod notice; keep everything else
    lines = [x for x in err.strip().splitlines() if "libkmod" not in x]
    return bool(lines)


def collect_local(source: str = "this build server") -> Captures:
    return collect(LocalRunner(), source)


def collect_ssh(host, accept_new_host_key: bool = False) -> Captures:
    """Capture an inventory Host over SSH (numaforge.remote.ssh; strict host keys, sudo per ssh.sudo)."""
    from ..remote.ssh import connect

    with connect(host.ssh, host.name, accept_new_host_key=accept_new_host_key) as r:
        return collect(r, host.name, sudo=host.ssh.sudo)


def command_line(spec: Spec) -> str:
    return f"sh -c {shlex.quote(spec.command)}"
