"""Per-host facts runs for the `facts` task: collect (SSH, local or a saved corpus) -> parse -> optional
check (the task passes numaforge.bios.verify.check_profile for --profile: facts knows nothing of BIOS profiles)
-> one report HostResult. The task itself only parses options and prints."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import NumaforgeError
from ..program import prog
from ..report import HostResult
from . import HostFacts, parse_facts, template_facts
from .captures import META, CaptureError, Captures
from .collect import collect_local, collect_ssh


@dataclass
class FactsOptions:
    save: str | None = None  # store raw captures under SAVE/<host>/
    accept_new_host_key: bool = False
    # an OS-side check of the parsed facts: check(result, facts, host) records its verdicts in result
    check: Callable[[HostResult, HostFacts, object], None] | None = None


def summary_line(f: HostFacts) -> str:
    parts = []
    if not f.numa.missing:
        parts.append(f"{len(f.numa.nodes)} NUMA node(s)")
    if f.cpu.sockets is not None:
        parts.append(f"{f.cpu.sockets} socket(s)")
    if f.cpu.l3_count is not None:
        parts.append(f"{f.cpu.l3_count} L3")
    if not f.pci.missing:
        parts.append(f"{len(f.pci.gpus)} GPU(s), {len(f.pci.nics)} NIC(s)")
    if f.iommu.groups is not None:
        parts.append(f"{f.iommu.groups} IOMMU group(s)")
    if f.kernel.release:
        parts.append(f"kernel {f.kernel.release}")
    if f.kernel.livepatches:
        parts.append("livepatch " + ", ".join(f"{p.name}={p.state}" for p in f.kernel.livepatches))
    if f.absent:
        parts.append("absent: " + ", ".join(sorted(f.absent)))
    return "; ".join(parts)


def _finish(result: HostResult, caps: Captures, opts: FactsOptions, host=None) -> HostResult:
    if opts.save:
        with result.step("save"):
            caps.save(Path(opts.save) / result.host)
    with result.step("parse"):
        facts = parse_facts(caps, result.host)
    result.data = {"facts": facts.as_dict(), "template_facts": template_facts(facts)}
    result.message = summary_line(facts)
    if facts.unreadable:  # garbage from the host: never facts, never ok
        result.status = "failed"
        result.message = f"cannot tell: {len(facts.unreadable)} capture(s) from {result.host} are not what their "
        result.message += "commands print: " + "; ".join(f"{k}: {v}" for k, v in facts.unreadable.items())
        result.message += f" (the rest: {summary_line(facts) or 'nothing'})"
    if opts.check is not None:
        with result.step("os-verify"):
            try:
                opts.check(result, facts, host)
            except NumaforgeError as exc:
                result.status, result.message = "failed", exc.render()
    return result


def run_host(host, opts: FactsOptions) -> HostResult:
    """Collect over SSH (read-only) and parse; a connection problem fails this host only."""
    result = HostResult(host.name)
    try:
        with result.step("collect"):
            caps = collect_ssh(host, accept_new_host_key=opts.accept_new_host_key)
    except NumaforgeError as exc:
        result.status, result.message = "failed", exc.render()
        return result
    return _finish(result, caps, opts, host)


def run_local(opts: FactsOptions, name: str = "localhost") -> HostResult:
    result = HostResult(name)
    with result.step("collect"):
        caps = collect_local(name)
    return _finish(result, caps, opts)


def saved_dirs(path: str) -> list[Path]:
    """A directory written by --save: either one host's captures or one subdirectory per host."""
    p = Path(path)
    if (p / META).is_file():
        return [p]
    if not p.is_dir():
        raise CaptureError(
            "no such capture directory", str(p), f"pass a directory written by `{prog()} facts --save DIR`"
        )
    dirs = sorted(d for d in p.iterdir() if (d / META).is_file())
    if not dirs:
        raise CaptureError(
            f"no {META} here or in any subdirectory",
            str(p),
            f"pass a directory written by `{prog()} facts --save DIR` (or one host's subdirectory)",
        )
    return dirs


def run_saved(directory: Path, opts: FactsOptions, host=None) -> HostResult:
    result = HostResult(directory.name)
    with result.step("load"):
        caps = Captures.load(directory)
    return _finish(result, caps, FactsOptions(save=None, check=opts.check), host)
