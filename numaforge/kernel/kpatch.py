"""kpatch-build orchestration: per-target inputs (the lab kernel tree, or a Debian tree prepared from the Debian
source + .config + Module.symvers with the -dbg vmlinux), preflight, the build with stage progress, the artifact
cache, signing and the module manifest.

The parts live in: kpatch_inputs (the lab and Debian target inputs), kpatch_errors (exceptions, failure mapping),
toolchain (kpatch-build discovery, compiler shim, KCFLAGS), kpatch_steps (stages, preflight verdicts, the
kpatch-build run). Their names are re-exported here for callers that use `kpatch.<name>`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .. import paths
from ..digest import sha256_file
from ..filelock import locked
from ..paths import cache_dir
from ..program import prog
from . import backport as bpm
from . import targets as tg
from .kpatch_errors import SETUP_FIX, KpatchBuildError, KpatchError, PreflightError, map_failure  # noqa: F401
from .kpatch_inputs import (  # noqa: F401  (kpatch.lab_kernel, kpatch.debian_tree_key ... for callers)
    DEBIAN_SIG_KEY,
    TargetInputs,
    debian_recipe,
    debian_target_inputs,
    debian_tree,
    debian_tree_key,
    lab_inputs,
    lab_kernel,
)
from .kpatch_steps import (  # noqa: F401
    FORBIDDEN_CONFIG,
    REQUIRED_CONFIG,
    STAGES,
    artifact_key,
    expand_build_targets,
    kpatch_command,
    modinfo,
    module_name,
    parse_config,
    parse_functions,
    parse_modinfo,
    parse_stage,
    preflight_compiler,
    preflight_config,
    preflight_disk,
    preflight_release,
    preflight_toolchain,
    release_makeflags,
    run_kpatch_build,
)
from .signing import sign_module, signing_inputs
from .toolchain import (  # noqa: F401
    KPATCH_VERSION_WANTED,
    BuildEnv,
    Toolchain,
    comment_of,
    compiler_shim,
    gcc_comment,
    kcflags,
    make_vars,
    toolchain,
    wrapper_env,
)

# ---------------------------------------------------------------- orchestration

DRIVER_VERSION = "1"  # bump when the build procedure changes what a module contains
DISK_NEED = 8 * 2**30


def build_root() -> Path:
    """Where modules are built, one directory per target (numaforge.paths.kpatch_build_dir)."""
    return paths.kpatch_build_dir()


@dataclass
class KpatchResult:
    target: str
    status: str  # built | unchanged | checked
    module: Path | None
    manifest: dict
    manifest_path: Path | None
    log: Path | None
    seconds: float = 0.0


def _failed(out: str, running: Path, failed: Path) -> KpatchBuildError:
    os.replace(running, failed)
    return map_failure(out + "\n" + failed.read_text(errors="replace"), str(failed))


def _ld_version() -> str:
    proc = subprocess.run(["ld", "--version"], capture_output=True, text=True)
    return proc.stdout.splitlines()[0] if proc.stdout else "?"


@dataclass(frozen=True)
class BuildOptions:
    """How build_kpatch builds: the build-kpatch task's options.

    cc_wrapper overrides the target's own (distcc, icecc, ccache); host_releases ({host: uname -r}) are checked
    against the target's release; check_only stops after kpatch-build's original-source checks; force ignores
    the artifact cache; sign_key/sign_cert sign the module (read only by the tree's scripts/sign-file);
    out_name is the directory under the kpatch build dir (default: the target's name; the measurement arms use
    their own so the shipped module stays in place)."""

    jobs: int = 2
    cc_wrapper: str | None = None
    host_releases: dict | None = None
    check_only: bool = False
    force: bool = False
    sign_key: str | None = None
    sign_cert: str | None = None
    out_name: str | None = None


def resolve_backport(t, bp, series: str | None):
    """The backport output to build for target `t`: `bp`, else the latest of `series`; checked to match `t`."""
    if bp is None:
        bp = bpm.latest(series or bpm.DEFAULT_SERIES, base_version=t.base_version)
        if bp is None:
            raise KpatchError(
                f"no backport output of series {series or bpm.DEFAULT_SERIES} for base "
                f"{t.base_version} (target {t.name})",
                "build/backport/",
                f"run `{prog()} backport --source {t.source}` first (or `{prog()} backport build-kpatch`)",
            )
    if bp.base_version != t.base_version:
        raise PreflightError(
            f"backport is for {bp.base_version}, target {t.name} is {t.base_version}",
            str(bp.combined_patch),
            f"run `{prog()} backport --source {t.source}`",
        )
    if t.kind == "debian" and bp.manifest.get("source_spec") not in (None, t.source):
        raise PreflightError(
            f"backport source {bp.manifest.get('source_spec')} is not the Debian source of {t.name}",
            str(bp.combined_patch),
            f"run `{prog()} backport --source {t.source}`",
        )
    if not Path(bp.combined_patch).is_file():
        raise KpatchError(
            "the backport's combined patch is missing", str(bp.combined_patch), f"re-run `{prog()} backport`"
        )
    return bp


def _preflight(t, tc: Toolchain, inputs: TargetInputs, comp: str, host_releases: dict | None) -> None:
    """Every preflight problem at once, as one PreflightError (the first one's where/fix, the others listed)."""
    errs = preflight_toolchain(tc.version, str(tc.kpatch_build))
    errs += preflight_compiler(comment_of(inputs.vmlinux), comp, t.compiler, str(inputs.vmlinux))
    errs += preflight_config(parse_config(inputs.config.read_text()), str(inputs.config))
    errs += preflight_release(t.kernel_release, inputs.release, host_releases or {}, f"target {t.name} ({t.path})")
    errs += preflight_disk(shutil.disk_usage(inputs.tree).free, DISK_NEED, str(inputs.tree))
    if errs:
        first = errs[0]
        more = "".join(f"\n  - {e.where}: {e.what} (fix: {e.fix})" for e in errs[1:])
        raise PreflightError(first.what + (f"; {len(errs) - 1} more:{more}" if more else ""), first.where, first.fix)


def provenance(bp) -> dict:
    """The manifest fields that name the backport a module came from (not inputs of the build itself: a new
    commit message or a kpatch: false patch changes them without changing what kpatch-build gets)."""
    return {
        "series_files": bp.manifest.get("series_files", {}),
        "patches": [
            {"file": p.get("file"), "sha256": p.get("sha256"), "kpatch": p.get("kpatch")}
            for p in bp.manifest.get("patches", [])
        ],
        "combined_patch": str(bp.combined_patch),
        "source_hash": bp.source_hash,
        "base_commit": bp.base_commit,
        "result_commit": bp.result_commit,
        "base_version": bp.base_version,
    }


def _reuse(outdir: Path, key: str, t, t0: float, log, prov: dict | None = None) -> KpatchResult | None:
    """The module already built from the same inputs (its manifest's key and the file's hash agree), if any.
    prov: the current backport's provenance(); when it differs (same combined patch, new result commit) the
    manifest is updated to it, so it always names the backport it is used with."""
    mpath = outdir / "manifest.json"
    if not mpath.exists():
        return None
    try:
        old = json.loads(mpath.read_text())
        ko = outdir / old["module_file"]
        if old.get("inputs_key") == key and ko.exists() and sha256_file(ko) == old["sha256"]:
            if prov and any(old.get(k) != v for k, v in prov.items()):
                log(f"{t.name}: same inputs, new backport {prov['result_commit'][:12]}: manifest updated")
                old.update(prov)
                tmp = mpath.with_name(f".{mpath.name}.tmp")
                tmp.write_text(json.dumps(old, indent=2) + "\n")
                tmp.replace(mpath)
            log(f"{t.name}: unchanged ({ko.name}, inputs key {key[:12]}): nothing to do")
            return KpatchResult(
                t.name, "unchanged", ko, old, mpath, Path(old.get("log", "")), round(time.monotonic() - t0, 2)
            )
    except (ValueError, KeyError, OSError):
        pass
    return None


class _Stages:
    """kpatch-build's stages as they are reached, with the seconds each took; keeps a second name for
    kpatch-build's own log (it deletes it on success)."""

    def __init__(self, kb_log: Path, kb_keep: Path, on_stage=None):
        self.kb_log, self.kb_keep, self.on_stage = kb_log, kb_keep, on_stage
        self.stages: list[dict] = []
        self._t = time.monotonic()

    def __call__(self, sid: str, label: str) -> None:
        if not self.kb_keep.exists() and self.kb_log.exists():
            try:
                os.link(self.kb_log, self.kb_keep)  # a second name keeps the content after kpatch-build's rm
            except OSError:
                pass
        now = time.monotonic()
        if self.stages:
            self.stages[-1]["seconds"] = round(now - self._t, 1)
        self._t = now
        self.stages.append({"stage": sid, "label": label})
        if self.on_stage:
            self.on_stage(sid, label)

    def close(self) -> None:
        if self.stages:
            self.stages[-1].setdefault("seconds", round(time.monotonic() - self._t, 1))

    def own_log(self) -> Path:
        return self.kb_keep if self.kb_keep.exists() else self.kb_log


def _kpatch_build(
    cmd,
    env,
    inputs: TargetInputs,
    restore_env: dict,
    log_path: Path,
    stages: _Stages,
    check_only: bool,
    log,
    t,
    build_targets: list[str],
):
    """Run kpatch-build under the tree's lock, append its own log to ours, restore a prebuilt tree.
    Returns (exit code, output, stopped early, restore result)."""
    with locked(inputs.tree.parent / ".kpatch-build.lock"):
        rc, out, stopped = run_kpatch_build(
            cmd, env, log_path, on_stage=stages, stop_at="build-original" if check_only else None
        )
        own = stages.own_log()
        if own.exists():
            with open(log_path, "a") as lf:
                lf.write("\n# ---- kpatch-build's own log (CACHEDIR/build.log) ----\n")
                lf.write(own.read_text(errors="replace"))
        stages.kb_keep.unlink(missing_ok=True)
        restored = None
        if inputs.restore and not stopped:
            stages("restore", "restoring the prebuilt tree")
            log(f"{t.name}: restoring the prebuilt tree (kpatch-build leaves patched objects)")
            with open(log_path, "a") as lf:
                lf.write("\n# ---- restore: rebuild the original objects ----\n")
                lf.flush()
                restored = inputs.restore(restore_env, lf, build_targets)
    return rc, out, stopped, restored


def _checked(t, cmd, env, inputs: TargetInputs, stages: _Stages, log_path: Path, t0: float) -> KpatchResult:
    man = {
        "target": t.name,
        "status": "checked",
        "command": cmd,
        "kernel_release": inputs.release,
        "stages": [s["stage"] for s in stages.stages],
        "log": str(log_path),
        "env": {k: env[k] for k in ("MAKEFLAGS",) if k in env},
    }
    return KpatchResult(t.name, "checked", None, man, None, log_path, round(time.monotonic() - t0, 2))


def _install_module(t, tmp_out: Path, outdir: Path, inputs: TargetInputs, signing, failed_log: Path, log):
    """Check the built .ko (livepatch, vermagic), sign it, and move it into `outdir` (old modules removed).
    Returns (module path, modinfo, signature)."""
    kos = sorted(tmp_out.glob("*.ko"))
    if not kos:
        raise KpatchBuildError(
            "kpatch-build reported success but wrote no .ko", str(tmp_out), "read the log", "unknown", str(failed_log)
        )
    info = modinfo(kos[0])
    if info.get("livepatch") != "Y":
        raise KpatchBuildError(
            f"module is not a livepatch module (modinfo livepatch={info.get('livepatch')!r})",
            str(kos[0]),
            "the target kernel needs CONFIG_LIVEPATCH=y",
            "not-livepatch",
            str(failed_log),
        )
    if info.get("vermagic", "").split(" ")[0] != t.kernel_release:
        raise KpatchBuildError(
            f"module vermagic '{info.get('vermagic')}' does not match the target release {t.kernel_release}",
            str(kos[0]),
            "fix kernel_release / KERNELRELEASE for this target",
            "vermagic",
            str(failed_log),
        )
    signature = sign_module(kos[0], inputs.tree, signing, log) if signing else None
    ko = outdir / kos[0].name
    for old_ko in outdir.glob("*.ko"):
        if old_ko.name != ko.name:
            old_ko.unlink()
    os.replace(kos[0], ko)
    return ko, info, signature


def _manifest(t, bp, tc, ko: Path, info: dict, signature, build: dict) -> dict:
    """The module's manifest.json: what was built, from which inputs, with which tools, and how long it took."""
    return {
        "target": t.name,
        "target_kind": t.kind,
        "module_file": ko.name,
        "module_name": info.get("name"),
        "sha256": sha256_file(ko),
        "size": ko.stat().st_size,
        "vermagic": info.get("vermagic"),
        "livepatch": info.get("livepatch"),
        "replace": t.replace,
        "signature": signature,
        "build_targets": build["build_targets"],
        "kernel_release": t.kernel_release,
        "patched_functions": parse_functions(build["out"]),
        "series": build["series"],
        **provenance(bp),
        "combined_patch_sha256": build["key_inputs"]["patch_sha256"],
        "toolchain": {
            "kpatch_build": tc.version,
            "gcc": build["key_inputs"]["compiler"],
            "compiler": t.compiler,
            "ld": _ld_version(),
            "cc_wrapper": build["cc_wrapper"],
        },
        "inputs": build["inputs"].identity,
        "inputs_key": build["key"],
        "tree": str(build["inputs"].tree),
        "vmlinux": str(build["inputs"].vmlinux),
        "restore": build["restored"],
        "stages": build["stages"],
        "command": build["cmd"],
        "log": str(build["log"]),
        "seconds": build["seconds"],
        "built": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def build_kpatch(
    target_name: str = "lab",
    bp=None,
    series: str | None = None,
    options: BuildOptions | None = None,
    log=print,
    on_stage=None,
) -> KpatchResult:
    """Build (or reuse) the live-patch module of the backported series for one target.

    bp: a numaforge.kernel.backport.BackportResult (default: the latest recorded backport of `series`).
    The steps: resolve the backport and the compiler wrapper, prepare the target's inputs (the lab kernel tree
    or a Debian tree), preflight everything at once, reuse an unchanged module, else run kpatch-build (restoring
    a prebuilt tree), check and install the module, write its manifest."""
    opts = options or BuildOptions()
    t0 = time.monotonic()
    t = tg.load_target(target_name)
    bp = resolve_backport(t, bp, series)
    series_name = bp.manifest.get("series", series or "series")
    tc = toolchain()
    cc_wrapper = tg.resolve_wrapper(t, opts.cc_wrapper)
    signing = signing_inputs(opts.sign_key, opts.sign_cert)
    shim = compiler_shim(t.compiler, cc_wrapper)
    comp = gcc_comment(shim)
    inputs = lab_inputs(tc, bp, log) if t.kind == "lab" else debian_target_inputs(t, tc, bp, shim, log)
    _preflight(t, tc, inputs, comp, opts.host_releases)

    patch = Path(bp.combined_patch)
    name = module_name(series_name)
    key_inputs = _key_inputs(t, tc, inputs, patch, name, comp, signing)
    key = artifact_key(key_inputs)
    outdir = build_root() / (opts.out_name or t.name)
    if not opts.force and not opts.check_only:
        reused = _reuse(outdir, key, t, t0, log, provenance(bp))
        if reused:
            return reused
    job = _Job(t, tc, bp, inputs, opts, shim, cc_wrapper, signing, patch, name, series_name, t0, log, on_stage)
    return _run(job, key_inputs, key, outdir)


@dataclass
class _Job:
    """One kpatch-build run's inputs, resolved and preflighted by build_kpatch."""

    t: tg.Target
    tc: Toolchain
    bp: object
    inputs: TargetInputs
    opts: BuildOptions
    shim: Path
    cc_wrapper: str | None
    signing: dict | None
    patch: Path
    name: str
    series_name: str
    t0: float
    log: Callable
    on_stage: Callable | None


def _run(job: _Job, key_inputs: dict, key: str, outdir: Path) -> KpatchResult:
    """kpatch-build in a scratch output dir, the tree restored, the module checked, installed and described."""
    t, tc, bp, inputs, opts, shim, cc_wrapper = job.t, job.tc, job.bp, job.inputs, job.opts, job.shim, job.cc_wrapper
    patch, name, series_name, t0, log, on_stage = job.patch, job.name, job.series_name, job.t0, job.log, job.on_stage
    work = cache_dir() / "kpatch" / "work" / t.name
    logs = _Logs.start(outdir, work, t.name, opts.check_only)
    tmp_out = Path(tempfile.mkdtemp(prefix=".out-", dir=outdir))
    env = _kpatch_env(shim, inputs, work, cc_wrapper)
    build_targets = expand_build_targets(t.build_targets, patch.read_text(errors="replace"))
    cmd = kpatch_command(
        tc,
        inputs.tree,
        inputs.vmlinux,
        patch,
        name,
        tmp_out,
        opts.jobs,
        inputs.config_arg,
        replace=t.replace,
        build_targets=build_targets,
    )
    stages = _Stages(work / "build.log", outdir / ".kpatch-build-own.log", on_stage)
    stages.kb_keep.unlink(missing_ok=True)
    log(f"{t.name}: kpatch-build {tc.version} on {inputs.tree} (log {logs.final})")
    try:
        restore_env = BuildEnv(shim, wrapper_env(cc_wrapper)).env()
        rc, out, stopped, restored = _kpatch_build(
            cmd, env, inputs, restore_env, logs.running, stages, opts.check_only, log, t, build_targets
        )
        if opts.check_only:
            if not stopped:
                raise _failed(out, logs.running, logs.failed)
            os.replace(logs.running, logs.final)
            return _checked(t, cmd, env, inputs, stages, logs.final, t0)
        if rc != 0:
            raise _failed(out, logs.running, logs.failed)
        ko, info, signature = _install_module(t, tmp_out, outdir, inputs, job.signing, logs.failed, log)
        os.replace(logs.running, logs.final)
    finally:
        shutil.rmtree(tmp_out, ignore_errors=True)
        if logs.running.exists():
            os.replace(logs.running, logs.failed)
    stages.close()
    build = {
        "build_targets": build_targets,
        "out": out,
        "series": series_name,
        "key_inputs": key_inputs,
        "key": key,
        "cc_wrapper": cc_wrapper,
        "inputs": inputs,
        "restored": restored,
        "stages": stages.stages,
        "cmd": cmd,
        "log": logs.final,
        "seconds": round(time.monotonic() - t0, 1),
    }
    manifest = _manifest(t, bp, tc, ko, info, signature, build)
    mpath = _write_manifest(outdir, manifest)
    log(
        f"{t.name}: built {ko.name} ({', '.join(f['function'] for f in manifest['patched_functions']) or '-'}) "
        f"in {manifest['seconds']} s"
    )
    return KpatchResult(t.name, "built", ko, manifest, mpath, logs.final, manifest["seconds"])


@dataclass
class _Logs:
    """kpatch-build's log while it runs, then as the last good build's log (beside its module), the --check
    run's, or the failed run's (each its own file, so a failure never overwrites the good build's log)."""

    running: Path
    final: Path
    failed: Path

    @classmethod
    def start(cls, outdir: Path, work: Path, target: str, check_only: bool) -> _Logs:
        work.mkdir(parents=True, exist_ok=True)
        outdir.mkdir(parents=True, exist_ok=True)
        logs = cls(
            outdir / ".kpatch-build.log.running",
            outdir / ("kpatch-build-check.log" if check_only else "kpatch-build.log"),
            outdir / "kpatch-build-failed.log",
        )
        logs.running.write_text(f"# numaforge build-kpatch {target} {datetime.now(timezone.utc).isoformat()}\n")
        return logs


def _key_inputs(t, tc, inputs, patch: Path, name: str, comp: str, signing: dict | None) -> dict:
    """Everything the module depends on: a change to any of them makes a new artifact key."""
    return {
        "driver": DRIVER_VERSION,
        "target": Path(t.path).read_text(),
        "inputs": inputs.identity,
        "patch_sha256": sha256_file(patch),
        "module": name,
        "kpatch": tc.version,
        "compiler": comp,
        "kcflags": " ".join(kcflags(tc).split()),
        "signing_cert_sha256": signing["cert_sha256"] if signing else None,
    }


def _kpatch_env(shim, inputs, work: Path, cc_wrapper: str | None) -> dict[str, str]:
    """kpatch-build's environment: its cache dir, the target's extras, the compiler wrapper; none of the
    flags kpatch-build sets itself."""
    env = BuildEnv(shim, {"CACHEDIR": str(work), **inputs.env_extra, **wrapper_env(cc_wrapper)}).env()
    for k in ("KCFLAGS", "KCPPFLAGS", "KPATCH_GCC_TEMPDIR", "KPATCH_GCC_SRCDIR"):
        env.pop(k, None)
    return env


def _write_manifest(outdir: Path, manifest: dict) -> Path:
    mpath = outdir / "manifest.json"
    tmpm = mpath.with_name(".manifest.json.tmp")
    tmpm.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmpm, mpath)
    return mpath
