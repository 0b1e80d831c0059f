"""Per-host facts runs for the `facts` task: collect (SSH, local or a saved corpus) -> parse -> optional
OS-side check of a BIOS profile -> one report HostResult. The task itself only parses options and prints."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import NumaforgeError
from ..report import HostResult
from . import HostFacts, parse_facts, template_facts
from .captures import META, CaptureError, Captures
from .collect import collect_local, collect_ssh

EXPECTED_NODES_VAR = "pci_numa_nodes"    # inventory host var: {"0000:41:00.0": 1, ...}


@dataclass
class Options:
    save: str | None = None              # store raw captures under SAVE/<host>/
    accept_new_host_key: bool = False
    profile: str | None = None           # "auto" = the host's bios_profile


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


def _profile_facts(host, facts: HostFacts) -> dict[str, Any]:
    """Inventory facts (numaforge.bios.profile.host_facts) overlaid with what the OS really shows."""
    from ..bios.profile import host_facts

    base = host_facts(host) if host is not None else {
        "host": facts.host, "vendor": "generic", "model": "", "sockets": 1, "cpu_model": "", "gpus": [],
        "gpu_count": 0, "nics": [], "nic_count": 0, "groups": [], "vars": {}}
    os_facts = {k: v for k, v in template_facts(facts).items() if v is not None}
    return {**base, **os_facts, "os": template_facts(facts)}


def check_profile(result: HostResult, facts: HostFacts, profile: str, host=None) -> None:
    """Render the profile over the host's facts and store OS-side verdicts in result.data["os_verify"]."""
    from ..bios.os_verify import MISMATCH, summary, verify
    from ..bios.profile import render_profile

    name = profile
    if profile == "auto":
        name = getattr(host, "bios_profile", None)
        if not name:
            raise NumaforgeError("the host has no bios_profile", f"host {facts.host}",
                                 "set bios_profile in the inventory or pass --profile NAME")
    p = render_profile(name, _profile_facts(host, facts))
    expected = {}
    if host is not None and isinstance(host.vars.get(EXPECTED_NODES_VAR), dict):
        for k, v in host.vars[EXPECTED_NODES_VAR].items():
            if isinstance(v, bool) or not isinstance(v, int):
                raise NumaforgeError(f"{EXPECTED_NODES_VAR}: {k!r} maps to {v!r}, not a NUMA node number",
                                     f"{host.location} (host {host.name})",
                                     f'write {EXPECTED_NODES_VAR}: {{"0000:41:00.0": 1, ...}}')
            expected[str(k)] = v
    verdicts = verify(p.settings, facts, expected)
    result.data["os_verify"] = {"profile": p.name, "summary": summary(verdicts),
                                "verdicts": [v.as_dict() for v in verdicts]}
    bad = [v.setting for v in verdicts if v.verdict == MISMATCH]
    if bad:
        result.status = "failed"
        result.message = f"profile {p.name}: OS shows a mismatch for {', '.join(bad)}"


def _finish(result: HostResult, caps: Captures, opts: Options, host=None) -> HostResult:
    if opts.save:
        with result.step("save"):
            caps.save(Path(opts.save) / result.host)
    with result.step("parse"):
        facts = parse_facts(caps, result.host)
    result.data = {"facts": facts.as_dict(), "template_facts": template_facts(facts)}
    result.message = summary_line(facts)
    if opts.profile:
        with result.step("os-verify"):
            try:
                check_profile(result, facts, opts.profile, host)
            except NumaforgeError as exc:
                result.status, result.message = "failed", exc.render()
    return result


def run_host(host, opts: Options) -> HostResult:
    """Collect over SSH (read-only) and parse; a connection problem fails this host only."""
    result = HostResult(host.name)
    try:
        with result.step("collect"):
            caps = collect_ssh(host, accept_new_host_key=opts.accept_new_host_key)
    except NumaforgeError as exc:
        result.status, result.message = "failed", exc.render()
        return result
    return _finish(result, caps, opts, host)


def run_local(opts: Options, name: str = "localhost") -> HostResult:
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
        raise CaptureError("no such capture directory", str(p), "pass a directory written by `invoke facts --save DIR`")
    dirs = sorted(d for d in p.iterdir() if (d / META).is_file())
    if not dirs:
        raise CaptureError(f"no {META} here or in any subdirectory", str(p),
                           "pass a directory written by `invoke facts --save DIR` (or one host's subdirectory)")
    return dirs


def run_saved(directory: Path, opts: Options, host=None) -> HostResult:
    result = HostResult(directory.name)
    with result.step("load"):
        caps = Captures.load(directory)
    return _finish(result, caps, Options(save=None, profile=opts.profile), host)
