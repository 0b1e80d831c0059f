"""Raw captures of one host: command outputs by name, plus what could not be captured and why.

A capture set is what ``collect`` brings back from a host and what the parsers read. On disk (``facts --save
DIR`` and the test corpus in tests/data/facts/) it is one directory per machine::

    lspci_-vvv_-D_-nn.txt                      output of `lspci -vvv -D -nn`
    head_-v_sys_devices_system_node.txt        `head -v` over the node sysfs files (==> path <== blocks)
    ...
    capture.yaml                               source, the exact command of every file, absent: name -> why

File names say which command produced them; ``capture.yaml`` holds the full command line. A capture that
could not be made (tool not installed, sysfs entry missing, permission) is listed under ``absent`` with the
reason, so every consumer can say "cannot tell, because ..." instead of crashing.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .. import safeio, yamlsrc
from ..errors import NumaforgeError
from ..paths import atomic_write_text
from ..program import prog
from ..secrets import redact

MAX_CAPTURE_FILE_BYTES = 64 * 1024 * 1024  # one captured command's output (safeio.read_input's cap)

META = "capture.yaml"


class CaptureError(NumaforgeError):
    """A capture directory is missing or malformed."""

    exit_code = 2


@dataclass
class Captures:
    source: str = ""  # host name / "this build server"
    files: dict[str, str] = field(default_factory=dict)  # capture name -> text
    commands: dict[str, str] = field(default_factory=dict)  # capture name -> command line that made it
    absent: dict[str, str] = field(default_factory=dict)  # capture name -> why it is missing
    warnings: dict[str, str] = field(default_factory=dict)  # capture name -> stderr of a partial capture
    notes: str = ""  # free text (how a corpus entry was made or edited)

    def get(self, name: str) -> str | None:
        return self.files.get(name)

    def why(self, name: str) -> str:
        if name in self.absent:
            return self.absent[name]
        return f"{name} was not captured"

    # ------------------------------------------------------------------ corpus on disk
    def save(self, directory: str | os.PathLike) -> Path:
        """Write the capture set as a corpus directory (files + capture.yaml), each file atomically."""
        d = safeio.ensure_dir(directory, what="capture directory (--save)", error=CaptureError, mode=0o777)
        for name, text in self.files.items():
            _check_name(name, d)
            atomic_write_text(d / name, redact(text))
        meta = {
            "source": self.source,
            "commands": dict(sorted(self.commands.items())),
            "absent": dict(sorted(self.absent.items())),
        }
        if self.notes:
            meta["notes"] = self.notes
        if self.warnings:
            meta["warnings"] = dict(sorted(self.warnings.items()))
        atomic_write_text(d / META, yaml.safe_dump(meta, sort_keys=False, width=200))
        return d

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "Captures":
        d = Path(directory)
        if not d.is_dir():
            raise CaptureError(
                "capture directory does not exist", str(d), f"pass a directory written by `{prog()} facts --save DIR`"
            )
        meta: dict = {}
        if (d / META).is_file():
            meta = yamlsrc.load(
                d / META, error=CaptureError, what="capture metadata", empty={}, syntax="not valid YAML"
            )
            if not isinstance(meta, dict):
                raise CaptureError(
                    "capture.yaml must be a mapping (source/commands/absent)",
                    str(d / META),
                    f"re-capture with `{prog()} facts --save`",
                )
        files = {}
        for p in sorted(d.iterdir()):
            if p.is_file() and p.name != META and not p.name.startswith("."):
                files[p.name] = safeio.read_input(
                    p,
                    what="capture file",
                    error=CaptureError,
                    max_bytes=MAX_CAPTURE_FILE_BYTES,
                    fix_size=f"a capture holds command output (KiB to a few MiB): re-capture with `{prog()} facts --save`",
                ).decode("utf-8", errors="replace")
        return cls(
            source=str(meta.get("source") or d.name),
            files=files,
            commands=dict(meta.get("commands") or {}),
            absent=dict(meta.get("absent") or {}),
            warnings=dict(meta.get("warnings") or {}),
            notes=str(meta.get("notes") or ""),
        )


def _check_name(name: str, d: Path) -> None:
    if "/" in name or name in ("", ".", "..", META):
        raise CaptureError(f"bad capture name {name!r}", str(d), "capture names are plain file names")


_HEAD = re.compile(r"^==> (.+) <==$")


def parse_head(text: str | None) -> dict[str, str]:
    """Split `head -v FILE...` output into {path: content} (content without the separating blank line)."""
    out: dict[str, str] = {}
    if not text:
        return out
    path: str | None = None
    buf: list[str] = []
    for line in text.splitlines():
        m = _HEAD.match(line)
        if m:
            if path is not None:
                out[path] = _strip_sep(buf)
            path, buf = m.group(1), []
        elif path is not None:
            buf.append(line)
    if path is not None:
        out[path] = _strip_sep(buf)
    return out


def _strip_sep(lines: list[str]) -> str:
    while lines and lines[-1] == "":
        lines = lines[:-1]
    return "\n".join(lines)


# The largest CPU number a cpulist may name (x86_64's NR_CPUS is at most 8192): a host's "0-4000000000" is
# garbage, not four billion CPUs to put in a set.
MAX_CPU = 8191


def parse_cpulist(text: str) -> list[int]:
    """Kernel cpulist format ("0-3,8,10-11") -> sorted CPU numbers. Raises ValueError on garbage, including a
    CPU number past MAX_CPU."""
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        return []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-", 1)
            lo, hi = int(a), int(b)
            if hi < lo or lo < 0:
                raise ValueError(f"bad cpu range {part!r}")
            if hi > MAX_CPU:
                raise ValueError(f"cpu {hi} is past the limit ({MAX_CPU})")
            cpus.update(range(lo, hi + 1))
        else:
            n = int(part)
            if not 0 <= n <= MAX_CPU:
                raise ValueError(f"cpu {n} is out of range (0..{MAX_CPU})")
            cpus.add(n)
    return sorted(cpus)


def try_cpulist(text: str) -> list[int] | None:
    """parse_cpulist, or None for a garbled value (a corrupt capture must not crash a facts run)."""
    try:
        return parse_cpulist(text)
    except ValueError:
        return None


def try_int(text: str | None, base: int = 10) -> int | None:
    try:
        return int(str(text).strip(), base)
    except (TypeError, ValueError):
        return None


def cpulist(cpus) -> str:
    """The inverse of parse_cpulist: [0,1,2,5] -> "0-2,5"."""
    cpus = sorted(set(cpus))
    parts, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(parts)


# Capture names (the corpus file names). collect.py holds the command behind each one.
LSPCI = "lspci_-vvv_-D_-nn.txt"
LSPCI_TREE = "lspci_-t_-D.txt"
NUMACTL = "numactl_--hardware.txt"
LSCPU = "lscpu.txt"
CPUINFO = "head_-n40_proc_cpuinfo.txt"
UNAME = "uname_-r.txt"
SYS_NODE = "head_-v_sys_devices_system_node.txt"
SYS_CPU = "head_-v_sys_devices_system_cpu.txt"
SYS_PCI = "head_-v_sys_bus_pci_devices.txt"
PCI_LINKS = "ls_-l_sys_bus_pci_devices.txt"
IOMMU_GROUPS = "ls_-1_sys_kernel_iommu_groups.txt"
PROC_KERNEL = "head_-v_proc_sys_kernel.txt"
