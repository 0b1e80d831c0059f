"""kpatch-build orchestration: per-target inputs (the lab kernel tree, or a Debian tree prepared from the Debian
source + .config + Module.symvers with the -dbg vmlinux), preflight, the build with stage progress, the artifact
cache, signing and the module manifest.

The parts live in: kpatch_errors (exceptions, failure mapping), toolchain (kpatch-build discovery, compiler shim,
KCFLAGS), kpatch_steps (stages, preflight verdicts, the kpatch-build run). Their names are re-exported here for
callers that use `kpatch.<name>`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

from .. import paths
from ..digest import sha256_bytes, sha256_file
from ..paths import cache_dir
from . import backport as bpm
from . import labkernel
from . import targets as tg
from .kpatch_errors import SETUP_FIX, KpatchBuildError, KpatchError, PreflightError, map_failure  # noqa: F401
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
from .kpatch_steps import FileLock as _Lock
from .signing import sign_module, signing_inputs
from .source import export_tree
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
class TargetInputs:
    """What kpatch-build gets for one target."""

    tree: Path
    vmlinux: Path
    config: Path
    release: str  # vermagic release the module will carry
    identity: dict  # hashes identifying the inputs (for the artifact key)
    config_arg: Path | None = None  # -c (Debian: the headers' .config)
    env_extra: dict = field(default_factory=dict)
    restore: Callable[..., dict] | None = (
        None  # (env, logf, build targets) -> dict: restores the tree after kpatch-build
    )


@dataclass
class KpatchResult:
    target: str
    status: str  # built | unchanged | checked
    module: Path | None
    manifest: dict
    manifest_path: Path | None
    log: Path | None
    seconds: float = 0.0


def _source_like(bp):
    """labkernel.lab_kernel wants repo/base_commit/source_hash: take them from the backport result."""
    return SimpleNamespace(repo=bp.tree, base_commit=bp.base_commit, source_hash=bp.source_hash)


def lab_kernel(source_spec: str | None = None, log=print):
    """For the lab VM helper: the built lab kernel (bzImage, vmlinux, release, build dir), building if needed.
    With no spec it uses the source of the latest backport for the lab's base version, else the lab target's
    source (Debian 5.10.262)."""
    lab = tg.load_target("lab")
    if source_spec is None:
        bp = bpm.latest(base_version=lab.base_version)
        if bp is not None:
            return labkernel.lab_kernel(log=log, source=_source_like(bp))
        source_spec = lab.source
    return labkernel.lab_kernel(source_spec, log=log)


def _lab_inputs(tc: Toolchain, bp, log) -> TargetInputs:
    lk = labkernel.lab_kernel(log=log, tc=tc, source=_source_like(bp))

    def restore(env: dict, logf, build_targets: list[str]) -> dict:
        # kpatch-build reverted the source but left patched objects in what it built (kernel/sched/fair.o and
        # built-in.a; vmlinux.o and vmlinux too when it built vmlinux): rebuild the same make targets from the
        # original source with the same variables, so the tree again equals the prebuilt one (checked by hash).
        env = dict(env)
        env.pop("KPATCH_GCC_TEMPDIR", None)
        env["KCFLAGS"] = kcflags(tc)
        targets = build_targets or ["vmlinux", "modules"]
        proc = subprocess.run(
            ["make", *make_vars(tc), f"-j{labkernel.JOBS}", *targets],
            cwd=lk.tree,
            env=env,
            stdout=logf,
            stderr=subprocess.STDOUT,
        )
        same = proc.returncode == 0 and sha256_file(lk.tree / "vmlinux") == sha256_file(lk.vmlinux)
        return {"restored": proc.returncode == 0, "vmlinux_identical": same, "targets": targets}

    return TargetInputs(
        lk.tree, lk.vmlinux, lk.config, lk.release, {"lab_key": lk.key, "source_hash": lk.source_hash}, restore=restore
    )


# how a Debian tree is prepared: part of its cache key (change it and a new tree is prepared)
DEBIAN_SIG_KEY = "certs/signing_key.pem"


def debian_recipe(t) -> str:
    """How the tree is prepared (not how much of it is built: any build target set reuses the same tree)."""
    return f"MODULE_SIG_KEY={DEBIAN_SIG_KEY};Module.symvers=headers"


def debian_tree_key(source_hash: str, config_sha256: str, compiler: str, kpatch_version: str, recipe: str) -> str:
    """Content hash naming a prepared Debian tree: the source, Debian's .config, compiler, kpatch and recipe."""
    return sha256_bytes(f"{source_hash}\0{config_sha256}\0{compiler}\0{kpatch_version}\0{recipe}".encode())[:16]


def debian_tree(t, tc: Toolchain, bp, di, shim: Path, log) -> Path:
    """The base source configured with Debian's .config and carrying Debian's Module.symvers (prepared once,
    cached by content hash; kpatch-build's "Building original source" then builds it incrementally, so a
    second build of any patch for the same kernel skips the cold kernel build).

    Debian's config names its signing key (MODULE_SIG_KEY, private to Debian); the tree signs with a key the
    build generates instead. Modules are not signed at build time (only by modules_install): numaforge signs
    the live patch with the user's key afterwards (build_kpatch(sign_key=..., sign_cert=...))."""
    key = debian_tree_key(bp.source_hash, sha256_file(di.config), t.compiler, tc.version, debian_recipe(t))
    root = cache_dir() / "kpatch" / "debian" / t.kernel_release / key
    tree = root / "linux"
    if (tree / ".numaforge-prepared").exists():
        return tree
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    log(f"{t.name}: extracting the base source into {tree}")
    if not export_tree(bp.tree, bp.base_commit, tree):
        raise KpatchError(
            "git archive of the base commit failed", f"{bp.tree}@{bp.base_commit}", "re-run `invoke backport`"
        )
    shutil.copy2(di.config, tree / ".config")
    env = BuildEnv(shim, {"KCFLAGS": kcflags(tc)}).env()
    for cmd in (
        ["scripts/config", "--file", ".config", "--set-str", "MODULE_SIG_KEY", DEBIAN_SIG_KEY],
        ["make", *make_vars(tc), "olddefconfig"],
    ):
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise KpatchError(
                f"{' '.join(cmd[:2])} failed: {proc.stdout[-400:]}{proc.stderr[-400:]}",
                str(tree),
                "check the Debian config and the compiler",
            )
    if di.symvers:
        shutil.copy2(di.symvers, tree / "Module.symvers")
    (tree / ".numaforge-prepared").write_text(key + "\n")
    return tree


def _debian_inputs(t, tc: Toolchain, bp, shim: Path, log) -> TargetInputs:
    di = tg.debian_inputs(t, log=log)
    tree = debian_tree(t, tc, bp, di, shim, log)
    st = di.vmlinux.stat()
    ident = {
        "source_hash": bp.source_hash,
        "config_sha256": sha256_file(di.config),
        "symvers_sha256": sha256_file(di.symvers) if di.symvers else None,
        "recipe": debian_recipe(t),
        "vmlinux": f"{t.debian['dbg_package']}={t.debian['version']}:{st.st_size}",
    }
    return TargetInputs(
        tree, di.vmlinux, tree / ".config", t.kernel_release, ident, env_extra=release_makeflags(t.kernel_release)
    )


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
                f"run `invoke backport --source {t.source}` first (or `invoke backport build-kpatch`)",
            )
    if bp.base_version != t.base_version:
        raise PreflightError(
            f"backport is for {bp.base_version}, target {t.name} is {t.base_version}",
            str(bp.combined_patch),
            f"run `invoke backport --source {t.source}`",
        )
    if t.kind == "debian" and bp.manifest.get("source_spec") not in (None, t.source):
        raise PreflightError(
            f"backport source {bp.manifest.get('source_spec')} is not the Debian source of {t.name}",
            str(bp.combined_patch),
            f"run `invoke backport --source {t.source}`",
        )
    if not Path(bp.combined_patch).is_file():
        raise KpatchError(
            "the backport's combined patch is missing", str(bp.combined_patch), "re-run `invoke backport`"
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
    with _Lock(inputs.tree.parent / ".kpatch-build.lock"):
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
    inputs = _lab_inputs(tc, bp, log) if t.kind == "lab" else _debian_inputs(t, tc, bp, shim, log)
    _preflight(t, tc, inputs, comp, opts.host_releases)

    patch = Path(bp.combined_patch)
    name = module_name(series_name)
    key_inputs = {
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
    key = artifact_key(key_inputs)
    outdir = build_root() / (opts.out_name or t.name)
    if not opts.force and not opts.check_only:
        reused = _reuse(outdir, key, t, t0, log, provenance(bp))
        if reused:
            return reused

    work = cache_dir() / "kpatch" / "work" / t.name
    work.mkdir(parents=True, exist_ok=True)
    outdir.mkdir(parents=True, exist_ok=True)
    # the log of the last good build stays next to its module; a failing or --check run gets its own file
    final_log = outdir / ("kpatch-build-check.log" if opts.check_only else "kpatch-build.log")
    log_path = outdir / ".kpatch-build.log.running"
    failed_log = outdir / "kpatch-build-failed.log"
    log_path.write_text(f"# numaforge build-kpatch {t.name} {datetime.now(timezone.utc).isoformat()}\n")
    tmp_out = Path(tempfile.mkdtemp(prefix=".out-", dir=outdir))
    env = BuildEnv(shim, {"CACHEDIR": str(work), **inputs.env_extra, **wrapper_env(cc_wrapper)}).env()
    for k in ("KCFLAGS", "KCPPFLAGS", "KPATCH_GCC_TEMPDIR", "KPATCH_GCC_SRCDIR"):
        env.pop(k, None)
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
    log(f"{t.name}: kpatch-build {tc.version} on {inputs.tree} (log {final_log})")
    try:
        restore_env = BuildEnv(shim, wrapper_env(cc_wrapper)).env()
        rc, out, stopped, restored = _kpatch_build(
            cmd, env, inputs, restore_env, log_path, stages, opts.check_only, log, t, build_targets
        )
        if opts.check_only:
            if not stopped:
                raise _failed(out, log_path, failed_log)
            os.replace(log_path, final_log)
            return _checked(t, cmd, env, inputs, stages, final_log, t0)
        if rc != 0:
            raise _failed(out, log_path, failed_log)
        ko, info, signature = _install_module(t, tmp_out, outdir, inputs, signing, failed_log, log)
        os.replace(log_path, final_log)
    finally:
        shutil.rmtree(tmp_out, ignore_errors=True)
        if log_path.exists():
            os.replace(log_path, failed_log)
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
        "log": final_log,
        "seconds": round(time.monotonic() - t0, 1),
    }
    manifest = _manifest(t, bp, tc, ko, info, signature, build)
    mpath = outdir / "manifest.json"
    tmpm = mpath.with_name(".manifest.json.tmp")
    tmpm.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmpm, mpath)
    log(
        f"{t.name}: built {ko.name} ({', '.join(f['function'] for f in manifest['patched_functions']) or '-'}) "
        f"in {manifest['seconds']} s"
    )
    return KpatchResult(t.name, "built", ko, manifest, mpath, final_log, manifest["seconds"])
