"""What kpatch-build gets for one target: the lab kernel's prebuilt tree (restored after each build), or a
Debian tree prepared once from the Debian source, .config and Module.symvers with the -dbg vmlinux."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..digest import sha256_bytes, sha256_file
from ..paths import cache_dir
from ..program import prog
from . import backport as bpm
from . import labkernel
from . import targets as tg
from .kpatch_errors import KpatchError
from .kpatch_steps import release_makeflags
from .source import export_tree
from .toolchain import BuildEnv, Toolchain, kcflags, make_vars


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


def source_like(bp) -> labkernel.SourceRef:
    """labkernel.lab_kernel wants repo/base_commit/source_hash: take them from the backport result."""
    return labkernel.SourceRef(bp.tree, bp.base_commit, bp.source_hash)


def lab_kernel(source_spec: str | None = None, log=print):
    """For the lab VM helper: the built lab kernel (bzImage, vmlinux, release, build dir), building if needed.
    With no spec it uses the source of the latest backport for the lab's base version, else the lab target's
    source (Debian 5.10.262)."""
    lab = tg.load_target("lab")
    if source_spec is None:
        bp = bpm.latest(base_version=lab.base_version)
        if bp is not None:
            return labkernel.lab_kernel(log=log, source=source_like(bp))
        source_spec = lab.source
    return labkernel.lab_kernel(source_spec, log=log)


def lab_inputs(tc: Toolchain, bp, log) -> TargetInputs:
    lk = labkernel.lab_kernel(log=log, tc=tc, source=source_like(bp))

    def restore(env: dict, logf, build_targets: list[str]) -> dict:
        # kpatch-build reverted the source but left patched objects in what it built (kernel/sched/fair.o and
        # built-in.a; vmlinux.o and vmlinux too when it built vmlinux): rebuild the same make targets from the
        # original source with the same variables, so the tree again equals the prebuilt one (checked by hash).
        env = dict(env)
        env.pop("KPATCH_GCC_TEMPDIR", None)
        env["KCFLAGS"] = kcflags(tc)
        targets = build_targets or ["vmlinux", "modules"]
        proc = subprocess.run(
            ["make", *make_vars(tc), f"-j{labkernel.jobs()}", *targets],
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
            "git archive of the base commit failed", f"{bp.tree}@{bp.base_commit}", f"re-run `{prog()} backport`"
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


def debian_target_inputs(t, tc: Toolchain, bp, shim: Path, log) -> TargetInputs:
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
