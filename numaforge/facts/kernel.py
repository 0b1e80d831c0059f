"""Kernel facts: release, command line (parsed), taint, livepatches and their state (pure parsers).

Source: ``head -v /proc/cmdline /proc/sys/kernel/{osrelease,tainted,numa_balancing}
/sys/kernel/livepatch/*/{enabled,transition}`` and ``uname -r``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from .captures import PROC_KERNEL, UNAME, Captures, parse_head


@dataclass
class Livepatch:
    name: str
    enabled: bool | None = None
    transition: bool | None = None

    @property
    def state(self) -> str:
        if self.enabled is None:
            return "unknown"
        if self.transition:
            return "transitioning"
        return "enabled" if self.enabled else "disabled"


@dataclass
class KernelFacts:
    release: str | None = None
    cmdline: str | None = None
    params: dict[str, str | None] = field(default_factory=dict)  # last value wins, like the kernel
    tainted: int | None = None
    livepatches: list[Livepatch] = field(default_factory=list)
    livepatch_dir: bool = False  # /sys/kernel/livepatch exists (CONFIG_LIVEPATCH)
    missing: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict:
        d: dict[str, Any] = {
            "release": self.release,
            "cmdline": self.cmdline,
            "tainted": self.tainted,
            "livepatches": [{"name": p.name, "state": p.state} for p in self.livepatches],
        }
        if self.missing:
            d["missing"] = self.missing
        return d


def parse_cmdline(text: str) -> dict[str, str | None]:
    """Kernel command line -> {param: value or None}; the part after a bare `--` goes to init and is skipped."""
    out: dict[str, str | None] = {}
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    for w in words:
        if w == "--":
            break
        k, eq, v = w.partition("=")
        out[k] = v if eq else None
    return out


_LP = re.compile(r"^/sys/kernel/livepatch/([^/]+)/(enabled|transition)$")


def kernel_facts(cap: Captures) -> KernelFacts:
    f = KernelFacts()
    files = parse_head(cap.get(PROC_KERNEL))
    uname = (cap.get(UNAME) or "").strip()
    f.release = uname or (files.get("/proc/sys/kernel/osrelease") or "").strip() or None
    if f.release is None:
        f.missing["release"] = f"uname -r: {cap.why(UNAME)}; /proc/sys/kernel/osrelease: {cap.why(PROC_KERNEL)}"
    if "/proc/cmdline" in files:
        f.cmdline = files["/proc/cmdline"].strip()
        f.params = parse_cmdline(f.cmdline)
    else:
        f.missing["cmdline"] = cap.why(PROC_KERNEL) if cap.get(PROC_KERNEL) is None else "/proc/cmdline unreadable"
    if (t := files.get("/proc/sys/kernel/tainted", "").strip()).isdigit():
        f.tainted = int(t)
    patches: dict[str, Livepatch] = {}
    for path, content in files.items():
        if m := _LP.match(path):
            lp = patches.setdefault(m.group(1), Livepatch(m.group(1)))
            val = content.strip()
            if val in ("0", "1"):
                setattr(lp, m.group(2), val == "1")
    f.livepatches = [patches[k] for k in sorted(patches)]
    return f
