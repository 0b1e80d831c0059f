"""The arms of the NUMA outcome measurement and their live-patch modules.

An arm is a state of the same booted kernel: ``off`` (no live patch: upstream 5.10), ``winner`` (the series'
kpatch-eligible patches, i.e. what numaforge ships), each ``alt-<name>`` (patches/<series>/alternatives/<name>/)
and ``null`` (patches/<series>/controls/null/: a live patch of the same function that changes nothing). Every
patched arm is backported onto the same 5.10 source and built with kpatch-build for the same target, so they
differ only in the patch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import NumaforgeError
from ..kernel import backport as kbackport
from ..kernel import kpatch as kkpatch
from ..kernel import labkernel
from ..kernel.series import load_series, resolve_dir

LAB_SOURCE = "debian:linux-source-5.10=5.10.262-1"
# the full-kernel knob control (protocol amendment 7): the scheduler feature the series' 0002 adds, and its two
# arms, each a write to /sys/kernel/debug/sched_features on a kernel with the whole series built in; the base
# (upstream's search, with 0000's distance fix since issue 42: the feature gates 0001 only) first
FEATURE = "NUMA_PREFER_LOCAL"
KNOB_ARMS = {"knob-off": f"NO_{FEATURE}", "knob-on": FEATURE}


class ArmError(NumaforgeError):
    """An arm of the measurement has no usable module."""


@dataclass
class Arm:
    name: str  # off | winner | alt-<name> | null
    series_dir: Path | None  # None for off
    module: Path | None = None  # built live-patch .ko (None for off)
    functions: tuple[str, ...] = ("task_numa_migrate",)  # from the build's manifest (built_arms/build_arms)


def arm_dirs(series: str = kbackport.DEFAULT_SERIES) -> dict[str, Path | None]:
    """{arm name: series dir} in a fixed order: off, winner, alternatives (sorted), null."""
    root = resolve_dir(series)
    arms: dict[str, Path | None] = {"off": None, "winner": root}
    alt = root / "alternatives"
    for d in sorted(alt.iterdir()) if alt.is_dir() else []:
        if (d / "series").is_file():
            arms[f"alt-{d.name}"] = d
    null = root / "controls" / "null"
    if (null / "series").is_file():
        arms["null"] = null
    return arms


def code_lines(series: str = kbackport.DEFAULT_SERIES, arms: list[str] | None = None) -> dict[str, int]:
    """{arm: code lines its live patch adds or removes} (the kpatch-eligible patches' hunks, comment and blank
    lines not counted; the size measure of the study's rule 5, "the smaller code change"), for every arm with a
    series but null."""
    return code_sizes(designs(series, arms))


def code_sizes(designs: dict[str, dict]) -> dict[str, int]:
    """{arm: code lines} of the designs in `designs` (``designs()``, or the record a study file keeps); null is
    a control, not a design, so it has no size."""
    return {a: d["code_lines"] for a, d in designs.items() if a != "null"}


def designs(series: str = kbackport.DEFAULT_SERIES, arms: list[str] | None = None) -> dict[str, dict]:
    """{arm: {"series", "patches", "subject", "code_lines"}} of every arm with a series (all but off): what each
    arm name stands for in the tree now. A study records it when it starts (bench/numa_effect.py probe), so its
    result still says which patch an arm was after the series changes (the shipped 0001 was swapped once)."""
    out = {}
    for name, d in arm_dirs(series).items():
        if d is None or (arms is not None and name not in arms):
            continue
        kp = [p for p in load_series(d).patches if p.kpatch]
        changed = [ln[1:].strip() for p in kp for h in p.hunks for ln in h.lines if ln[:1] in ("+", "-")]
        out[name] = {
            "series": _series_name(d),
            "patches": [p.name for p in kp],
            "subject": kp[0].subject if kp else "",
            "code_lines": sum(1 for c in changed if c and not c.startswith(("/*", "*", "//"))),
        }
    return out


def out_name(target: str, arm: str) -> str:
    """Build directory name (under numaforge.paths.kpatch_build_dir()) of an arm's module: the winner keeps the target's own (what validate ships)."""
    return target if arm == "winner" else f"{target}-{arm}"


def build_arms(
    series: str = kbackport.DEFAULT_SERIES,
    target: str = "lab",
    source: str = LAB_SOURCE,
    arms: list[str] | None = None,
    log=print,
) -> list[Arm]:
    """Backport every arm's series onto `source` and build its live patch for `target` (cached by inputs)."""
    out = []
    for name, d in arm_dirs(series).items():
        if arms and name not in arms:
            continue
        if d is None:
            out.append(Arm(name, None))
            continue
        bp = kbackport.backport(source, str(d), compilers=("gcc-10",), compile_check=True, log=log)
        res = kkpatch.build_kpatch(
            target, bp=bp, options=kkpatch.BuildOptions(out_name=out_name(target, name)), log=log
        )
        out.append(Arm(name, d, res.module, _functions(res.manifest)))
    return out


def knob_designs(series: str = kbackport.DEFAULT_SERIES) -> dict[str, dict]:
    """What the knob control's arms are (a study records it like ``designs``): the whole series built in, the
    feature off (upstream's search of the other nodes; since issue 42 with 0000's distance fix, which the feature
    does not gate) or on (the shipped design)."""
    every = [p.name for p in load_series(resolve_dir(series)).patches]
    return {
        arm: {
            "series": _series_name(resolve_dir(series)),
            "patches": every,
            "subject": f"the whole series built in, {word} in sched_features",
        }
        for arm, word in KNOB_ARMS.items()
    }


def full_kernel(series: str = kbackport.DEFAULT_SERIES, source: str = LAB_SOURCE, log=print) -> labkernel.LabKernel:
    """The lab kernel with the whole series built in (0002's scheduler feature too): the series backported onto
    `source` and built incrementally from the lab kernel's built tree (numaforge.kernel.labkernel.series_kernel;
    cached by content)."""
    bp = kbackport.backport(source, str(resolve_dir(series)), compilers=("gcc-10",), compile_check=True, log=log)
    return labkernel.series_kernel(bp.tree, bp.base_commit, bp.result_commit, bp.source_hash, log=log)


def built_arms(series: str = kbackport.DEFAULT_SERIES, target: str = "lab", arms: list[str] | None = None) -> list[Arm]:
    """The arms whose modules are already built (<kpatch build dir>/<out_name>/manifest.json); error if one is not."""
    out = []
    for name, d in arm_dirs(series).items():
        if arms and name not in arms:
            continue
        if d is None:
            out.append(Arm(name, None))
            continue
        mpath = kkpatch.build_root() / out_name(target, name) / "manifest.json"
        if not mpath.is_file():
            raise ArmError(
                f"arm {name} has no built module ({mpath} missing)",
                str(d),
                "build the arms first: python bench/numa_effect.py build",
            )
        man = json.loads(mpath.read_text())
        ko = mpath.parent / man["module_file"]
        if man.get("series") != _series_name(d):
            raise ArmError(
                f"{mpath} holds series {man.get('series')}, not {_series_name(d)}",
                str(mpath),
                "rebuild the arms: python bench/numa_effect.py build",
            )
        out.append(Arm(name, d, ko, _functions(man)))
    unknown = set(arms or []) - {a.name for a in out}
    if unknown:
        raise ArmError(
            f"unknown arm(s) {', '.join(sorted(unknown))}", "--arms", f"choose from {', '.join(arm_dirs(series))}"
        )
    return out


def _functions(manifest: dict) -> tuple[str, ...]:
    """The functions kpatch-build reported changed (task_numa_migrate for the filters, task_numa_find_cpu for
    the root-cause arm); the default when the manifest has none."""
    found = tuple(f["function"] for f in manifest.get("patched_functions", []) if isinstance(f, dict))
    return found or Arm.functions


def _series_name(d: Path) -> str:
    return yaml.safe_load((d / "metadata.yaml").read_text())["name"]
