"""A probe study kept in one file, block by block, so a study longer than one sitting can be run in chunks.

The protocol (docs/numa-effect-protocol.md) wants at least 20 blocks of every arm in the main case and its
source-busy control: about 4 hours of a TCG lab VM. ``measure_scenario`` (numaforge.livepatch.probe) calls back
after every block; the study file is rewritten atomically then, so a cut-short chunk keeps every finished block,
and the next chunk continues from the next block with the same settings. A block's arm order depends only on
the seed, the case and the block's number (``block_order``), so the schedule is the same however the study is
cut into chunks. Mixing settings (other arms, window, buffer, topology, kernel, modules) in one file is refused;
a study started since issue 42's matrix also pins the lab kernel's recipe and content key (``pin_lab_kernel``),
checked before the VM boots.
"""

from __future__ import annotations

import json
import random
from dataclasses import fields
from pathlib import Path

from ..kernel.labkernel import LAB_CONFIG_ENV
from ..safeio import read_input, write_output
from .scenario import ProbeMetrics, ScenarioError

FORMAT = "numaforge-probe-study/1"
MAX_BYTES = 64 * 1024 * 1024  # 20 blocks x 2 cases x 5 arms of run records are well under 1 MiB
_FIELDS = {f.name for f in fields(ProbeMetrics)}
LAB_KERNEL = "lab_kernel"  # the settings' pin of the booted lab kernel: {"config": recipe name, "key": content key}


class LabKernelMismatch(ScenarioError):
    """A study pinned to one lab kernel, continued on another (a bad $NUMAFORGE_LAB_CONFIG, a bad option value)."""

    exit_code = 2


def block_order(arms: list[str], seed: int, case: str, block: int) -> list[str]:
    """The arms of one block in their seeded random order (independent of earlier blocks)."""
    order = list(arms)
    random.Random(f"{seed}/{case}/{block}").shuffle(order)
    return order


def load(path: Path, settings: dict) -> dict[str, list[list[ProbeMetrics]]]:
    """The finished blocks of the study at ``path`` (none when it does not exist yet), per case.

    Refuses a file of another format or with other settings: its blocks cannot be pooled with these."""
    if not path.exists():
        return {}
    where = str(path)
    old, _chunks, out = read(path)
    diff = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
    if diff:
        shown = "; ".join(f"{k}: study {old.get(k)!r}, now {settings.get(k)!r}" for k in diff)
        raise ScenarioError(
            f"this study was run with other settings ({shown})",
            where,
            "continue it with the same options and modules, or start a new study with another --study path",
        )
    return out


def pin_lab_kernel(settings: dict, old: dict | None, booting: dict | None, where: str) -> dict:
    """``settings`` with the lab kernel about to boot pinned (``LAB_KERNEL``: its recipe name in
    numaforge.kernel.labkernel.LAB_CONFIGS and its content key), written with the study's first block.

    ``old``: the study's settings (None for a new study); ``booting``: {"config", "key"} of the kernel about to
    boot, None when it is not the lab kernel (--kernel debian). A study pinned to another recipe or key is
    refused (LabKernelMismatch, exit 2) before the VM boots, naming both and the variable that chooses the recipe;
    a study from before the pin goes on with its settings unchanged (``load`` compares them whole)."""
    if old is not None and LAB_KERNEL not in old:
        return settings
    pinned = old.get(LAB_KERNEL) if old is not None else None
    if pinned is not None and pinned != booting:

        def said(pin: dict) -> str:
            return f"{pin.get('config')!r} (content key {pin.get('key')})"

        now = f"lab kernel {said(booting)}" if booting else "a kernel that is not the lab kernel (--kernel)"
        raise LabKernelMismatch(
            f"this study was measured on lab kernel {said(pinned)}, and the kernel about to boot is {now}",
            where,
            f"continue it with {LAB_CONFIG_ENV}={pinned.get('config')} and --kernel lab (the lab kernel with key "
            f"{pinned.get('key')}: the same source, fragment, lab patches and compiler), or start a new study "
            "with another --study path",
        )
    return {**settings, LAB_KERNEL: booting} if booting is not None else settings


def read(path: Path) -> tuple[dict, list[dict], dict[str, list[list[ProbeMetrics]]]]:
    """(settings, chunks, blocks per case) of a study file, whatever its settings (``load`` compares them)."""
    where = str(path)
    try:
        data = json.loads(_read(path))
    except ValueError as exc:
        raise ScenarioError(f"the study file is not JSON: {exc}", where, "give a new --study path") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ScenarioError(
            f"not a probe study file (format {data.get('format') if isinstance(data, dict) else None!r}, "
            f"expected {FORMAT!r})",
            where,
            "give a new --study path; a probe run's report JSON is not a study file",
        )
    out: dict[str, list[list[ProbeMetrics]]] = {}
    window = ((data.get("settings") or {}).get("params") or {}).get("seconds")
    for case, blocks in (data.get("blocks") or {}).items():
        out[case] = [[_censored(_metrics(r, where), window) for r in block] for block in blocks]
    counts = {len(b) for b in out.values()}
    if len(counts) > 1:
        raise ScenarioError(
            f"the study's cases have different numbers of blocks ({', '.join(f'{c}: {len(b)}' for c, b in out.items())})",
            where,
            "the file was edited by hand; restore it or start a new study",
        )
    return data.get("settings", {}), list(data.get("chunks") or []), out


def save(path: Path, settings: dict, blocks: dict[str, list[list[ProbeMetrics]]], chunks: list[dict]) -> None:
    """Write the study atomically (every finished block of every case, and when each chunk ran)."""
    doc = {
        "format": FORMAT,
        "protocol": "docs/numa-effect-protocol.md",
        "settings": settings,
        "chunks": chunks,
        "blocks": {case: [[r.as_dict() for r in block] for block in bl] for case, bl in blocks.items()},
    }
    write_output(path, json.dumps(doc, indent=1) + "\n", "--study")


def chunks_of(path: Path) -> list[dict]:
    """The chunk records of an existing study file (empty for a new one)."""
    return read(path)[1] if path.exists() else []


def _read(path: Path) -> bytes:
    return read_input(path, what="study file", error=ScenarioError, max_bytes=MAX_BYTES)


def _censored(rm: ProbeMetrics, window: object) -> ProbeMetrics:
    """A run that never got 90 % local counts as the registered window (scenario.probe_metrics does so since
    the censoring fix; runs recorded before it carry the measured window's length, milliseconds longer)."""
    if not rm.reached_90 and rm.time_to_90 is not None and isinstance(window, (int, float)):
        rm.time_to_90 = float(window)
    return rm


def _metrics(d: object, where: str) -> ProbeMetrics:
    if not isinstance(d, dict) or not {"label", "round"} <= set(d) or not set(d) <= _FIELDS:
        raise ScenarioError(
            "a run in the study file is not a probe run record", where, "restore the file or start a new study"
        )
    return ProbeMetrics(**d)
