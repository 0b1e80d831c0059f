"""Collect raw captures from a host: read-only commands, nothing installed, nothing written on the host.

    caps = collect_ssh(host)          # over numaforge.remote.ssh (strict host keys)
    caps = collect_local()            # this build server, same commands through `sh -c`

Every capture is one POSIX-sh command (works with bash, dash and busybox sh). A missing tool (exit 127 from the
`command -v` guard), a missing sysfs entry (exit 3 from the existence guard), a failure or a timeout becomes
``Captures.absent[name] = reason``; only a lost connection aborts the host. ``lspci`` runs through sudo when the
inventory says ``ssh.sudo: true`` (without root it cannot read capabilities: ACS/ASPM become "cannot tell").

All captures go to the host as **one** command (one SSH session, like Ansible's fact gathering), each in its own
``sh -c`` between marker lines (a random token) on stdout and stderr, followed by its exit status. A host whose
login shell is expensive (this build server's root ~/.bashrc runs pyenv: ~0.15 s) pays that once, not 12 times.
If the batch runs past the longest capture timeout, what finished is kept, the capture that was running becomes
"did not finish", and the ones not reached run one by one with their own timeouts.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import signal
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
    return (
        f'files=; for f in {pats}; do [ -e "$f" ] && files="$files $f"; done; '
        f'[ -n "$files" ] || exit {EXIT_NO_FILES}; exec head -v -n {lines} $files'
    )


def _dir(path: str, argv: str) -> str:
    return f"[ -d {path} ] || exit {EXIT_NO_FILES}; exec {argv}"


@dataclass(frozen=True)
class Spec:
    name: str  # capture (corpus file) name
    command: str  # the sh command
    what: str  # human name of the tool/source, for reasons
    hint: str  # what to install/enable on the host to get it
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
    Spec(
        C.SYS_NODE,
        _head(
            [
                f"{NODE}/online",
                f"{NODE}/possible",
                f"{NODE}/node[0-9]*/cpulist",
                f"{NODE}/node[0-9]*/distance",
                f"{NODE}/node[0-9]*/meminfo",
            ]
        ),
        "NUMA node sysfs",
        "a kernel with CONFIG_NUMA and /sys mounted",
    ),
    Spec(
        C.SYS_CPU,
        _head(
            [
                f"{CPU}/topology/physical_package_id",
                f"{CPU}/topology/thread_siblings_list",
                f"{CPU}/cache/index3/level",
                f"{CPU}/cache/index3/shared_cpu_list",
            ]
        ),
        "CPU topology sysfs",
        "/sys mounted",
    ),
    Spec(
        C.SYS_PCI,
        _head([f"{PCI}/class", f"{PCI}/vendor", f"{PCI}/device", f"{PCI}/numa_node", f"{PCI}/sriov_totalvfs"]),
        "PCI sysfs",
        "a kernel with PCI and /sys mounted",
    ),
    Spec(
        C.PCI_LINKS,
        _dir("/sys/bus/pci/devices", "ls -l /sys/bus/pci/devices/"),
        "PCI sysfs",
        "a kernel with PCI and /sys mounted",
    ),
    Spec(
        C.IOMMU_GROUPS,
        _dir("/sys/kernel/iommu_groups", "ls -1 /sys/kernel/iommu_groups"),
        "/sys/kernel/iommu_groups",
        "a kernel with IOMMU support (CONFIG_IOMMU_API)",
    ),
    Spec(
        C.PROC_KERNEL,
        _head(
            [
                "/proc/cmdline",
                "/proc/sys/kernel/osrelease",
                "/proc/sys/kernel/tainted",
                "/proc/sys/kernel/numa_balancing",
                "/sys/kernel/livepatch/*/enabled",
                "/sys/kernel/livepatch/*/transition",
            ]
        ),
        "/proc kernel files",
        "mount /proc",
    ),
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
        p = subprocess.Popen(
            ["sh", "-c", command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # the whole tree: a batch's children hold the pipes too
            out, err = p.communicate()
            raise _LocalTimeout(timeout, out, err) from None
        return Outcome(p.returncode, out, err)


class _LocalTimeout(Exception):
    def __init__(self, timeout, stdout: str = "", stderr: str = ""):
        self.timeout, self.stdout, self.stderr = timeout, stdout, stderr


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
    """Run every capture command through ``runner`` (one batch, module docstring); failures become absent
    reasons (never an exception, except a lost SSH connection, which fails the whole host)."""
    from ..remote.ssh import CommandTimeout

    specs = list(specs or SPECS)
    as_root = {s.name: bool(sudo and s.sudo and not getattr(runner, "is_root", True)) for s in specs}
    cap = Captures(source=source)
    for spec in specs:
        cap.commands[spec.name] = spec.command
    token = f"NUMAFORGE-{secrets.token_hex(8)}"
    batch_timeout = max(s.timeout for s in specs)
    try:
        r = runner.run(batch_script(specs, as_root, token), timeout=batch_timeout, sudo=False, check=False)
        out, err, timed_out = r.stdout, r.stderr, False
    except (CommandTimeout, _LocalTimeout) as exc:
        out, err, timed_out = exc.stdout, exc.stderr, True
    finished, started = split_batch(out, err, token, len(specs))
    for i, spec in enumerate(specs):
        if i in finished:
            rc, stdout, stderr = finished[i]
            _record(
                cap,
                spec,
                rc,
                stdout,
                stderr,
                as_root[spec.name],
                getattr(runner, "where", source),
                getattr(runner, "user", ""),
            )
        elif timed_out and i == started:
            cap.absent[spec.name] = f"`{_short(spec)}` did not finish within {batch_timeout:g} s"
        else:
            _collect_one(runner, cap, spec, sudo)  # not reached by the batch (or its output was unreadable)
    return cap


def batch_script(specs: list[Spec], as_root: dict[str, bool], token: str) -> str:
    """One sh script running every capture in its own `sh -c`, framed by marker lines on stdout and stderr:
    "TOKEN i" before, a newline then "TOKEN i end RC" after (the newline keeps output without one intact)."""
    lines = []
    for i, spec in enumerate(specs):
        run = f"sh -c {shlex.quote(spec.command)}"
        if as_root[spec.name]:
            run = f"sudo -n -- {run}"
        lines.append(
            f"echo '{token} {i}'; echo '{token} {i}' >&2; {run} </dev/null; rc=$?; "
            f"echo; echo \"{token} {i} end $rc\"; echo >&2; echo '{token} {i} end' >&2"
        )
    return "\n".join(lines) + "\n"


def split_batch(out: str, err: str, token: str, count: int) -> tuple[dict[int, tuple[int, str, str]], int | None]:
    """Parse a batch's output: ({index: (rc, stdout, stderr)} of finished captures, index of the last started)."""
    finished: dict[int, tuple[int, str, str]] = {}
    started = None
    for m in re.finditer(rf"^{token} (\d+)\n", out, re.M):
        i = int(m.group(1))
        if i >= count:
            continue
        started = i
        end = re.compile(rf"\n{token} {i} end (-?\d+)\n").search(out, m.end())
        if end is None:
            continue
        e_start = err.find(f"{token} {i}\n")
        e_end = err.find(f"\n{token} {i} end\n", e_start)
        if e_start < 0 or e_end < 0:
            continue
        finished[i] = (int(end.group(1)), out[m.end() : end.start()], err[e_start + len(f"{token} {i}\n") : e_end])
    return finished, started


def _collect_one(runner: Runner, cap: Captures, spec: Spec, sudo: bool) -> None:
    from ..remote.ssh import CommandTimeout, SudoError

    try:
        r = runner.run(spec.command, timeout=spec.timeout, sudo=bool(sudo and spec.sudo), check=False)
    except (CommandTimeout, _LocalTimeout) as exc:
        cap.absent[spec.name] = f"`{_short(spec)}` did not finish within {getattr(exc, 'timeout', spec.timeout):g} s"
        return
    except SudoError as exc:
        cap.absent[spec.name] = f"`{_short(spec)}` needs root and sudo refused: {exc.what}"
        return
    _record(cap, spec, r.rc, r.stdout, r.stderr)


def _record(
    cap: Captures,
    spec: Spec,
    rc: int,
    stdout: str,
    stderr: str,
    via_sudo: bool = False,
    where: str = "",
    user: str = "",
) -> None:
    if via_sudo and rc != 0:
        from ..remote.ssh import CommandResult, SudoError, check_sudo

        try:
            check_sudo(CommandResult(rc, stdout, stderr, 0.0, spec.command), where, user)
        except SudoError as exc:
            cap.absent[spec.name] = f"`{_short(spec)}` needs root and sudo refused: {exc.what}"
            return
    if rc == 0 or (stdout.strip() and rc not in (EXIT_NO_TOOL, EXIT_NO_FILES)):
        cap.files[spec.name] = stdout
        if rc != 0 or _real_stderr(stderr):
            cap.warnings[spec.name] = f"exit {rc}: {stderr.strip()[-500:]}" if rc else stderr.strip()[-500:]
    else:
        cap.absent[spec.name] = _reason(spec, rc, stderr)


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
