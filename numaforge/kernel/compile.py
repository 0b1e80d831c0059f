"""Compile check: build the objects a series touches, with a NUMA+LIVEPATCH config, per compiler.

Each compiler gets its own object directory (make O=...), so checks do not clobber each other and the source
tree stays clean. Config = x86_64 defconfig + the series' kconfig fragment (merge_config.sh, olddefconfig);
every option of the fragment must survive olddefconfig. A stamp in the object dir records the result commit,
compiler version and fragment hash, so a warm run with nothing changed does not call make at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from ..errors import NumaforgeError, ToolMissingError
from ..filelock import locked

STAMP = ".numaforge-compile.json"
JOBS = "2"  # shared 2-core build servers: never more


class CompileError(NumaforgeError):
    """The config could not be made or an object did not build."""

    exit_code = 5


def fragment_options(text: str) -> dict[str, str]:
    """{'CONFIG_NUMA': 'y', ...} from a kconfig fragment (comments and '# CONFIG_X is not set' handled)."""
    opts: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$", line.strip())
        if m:
            opts[m.group(1)] = m.group(2)
            continue
        m = re.match(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$", line.strip())
        if m:
            opts[m.group(1)] = "n"
    return opts


def missing_options(wanted: dict[str, str], config_text: str) -> list[str]:
    have = fragment_options(config_text)
    return [f"{k}={v}" for k, v in wanted.items() if have.get(k, "n") != v]


def warnings_of(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if re.search(r"\bwarning:", ln)]


def compiler_version(cc: str) -> str:
    if shutil.which(cc) is None:
        raise ToolMissingError(
            f"compiler {cc} not found", None, "run scripts/setup.sh (installs gcc-12, and gcc-10 from bullseye)"
        )
    return subprocess.run([cc, "-dumpfullversion"], capture_output=True, text=True).stdout.strip()


def _make(
    tree: Path, objdir: Path, cc: str, *targets: str, env_extra: dict | None = None
) -> subprocess.CompletedProcess:
    cmd = ["make", "-C", str(tree), f"O={objdir}", f"CC={cc}", f"-j{JOBS}", *targets]
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env_extra or {})})


def _fail(proc: subprocess.CompletedProcess, step: str, where: str, fix: str) -> CompileError:
    errs = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "error" in ln.lower()] or (
        proc.stdout + proc.stderr
    ).strip().splitlines()[-15:]
    return CompileError(f"{step} failed:\n    " + "\n    ".join(errs[:20]), where, fix)


def check(
    tree: Path, objects: list[str], cc: str, objdir: Path, fragment: Path | None, result_commit: str, log=None
) -> dict:
    """Build `objects` from `tree` with compiler `cc` in `objdir`; returns a record for the manifest."""
    version = compiler_version(cc)
    for tool in ("make", "bison", "flex", "bc"):
        if shutil.which(tool) is None:
            raise ToolMissingError(
                f"{tool} not found (needed to configure/prepare the kernel)",
                None,
                "run scripts/setup.sh (scripts/setup.d/20-kernel-toolchain.sh)",
            )
    frag_text = fragment.read_text() if fragment else ""
    wanted = fragment_options(frag_text)
    key = {
        "result_commit": result_commit,
        "cc": cc,
        "cc_version": version,
        "objects": objects,
        "fragment_sha256": hashlib.sha256(frag_text.encode()).hexdigest(),
        "tree": str(tree),
    }
    objdir.mkdir(parents=True, exist_ok=True)
    with locked(objdir / ".numaforge-lock"):
        return _check(tree, objects, cc, objdir, fragment, version, wanted, key, log)


def _configure(tree, cc, objdir, fragment, version, wanted, key, log) -> None:
    """x86_64 defconfig plus the series' fragment in objdir, once per compiler version, fragment and tree."""
    config = objdir / ".config"
    cfg_stamp = objdir / ".numaforge-config.json"
    cfg_key = {"cc_version": version, "fragment_sha256": key["fragment_sha256"], "tree": str(tree)}
    if config.exists() and cfg_stamp.exists() and json.loads(cfg_stamp.read_text()) == cfg_key:
        return
    if log:
        log(f"{cc}: configuring (x86_64 defconfig + {fragment.name if fragment else 'no fragment'})")
    proc = _make(tree, objdir, cc, "defconfig")
    if proc.returncode != 0:
        raise _fail(
            proc,
            f"make defconfig with {cc}",
            str(tree),
            "the tree must be clean for O= builds: run `make mrproper` in it",
        )
    if fragment:
        proc = subprocess.run(
            [str(tree / "scripts/kconfig/merge_config.sh"), "-m", "-O", str(objdir), str(config), str(fragment)],
            capture_output=True,
            text=True,
            cwd=objdir,
        )
        if proc.returncode != 0:
            raise _fail(proc, "merge_config.sh", str(fragment), "fix the fragment syntax")
        proc = _make(tree, objdir, cc, "olddefconfig")
        if proc.returncode != 0:
            raise _fail(proc, "make olddefconfig", str(objdir), "check the fragment's options")
        lost = missing_options(wanted, config.read_text())
        if lost:
            raise CompileError(
                f"config options did not survive olddefconfig: {', '.join(lost)}",
                str(fragment),
                "add the options they depend on to the fragment",
            )
    cfg_stamp.write_text(json.dumps(cfg_key))


def _check(tree, objects, cc, objdir, fragment, version, wanted, key, log) -> dict:
    stamp = objdir / STAMP
    if stamp.exists():
        try:
            rec = json.loads(stamp.read_text())
        except ValueError:
            rec = {}
        if rec.get("key") == key and rec.get("ok") and all((objdir / o).exists() for o in objects):
            return {**rec["record"], "cached": True}
        stamp.unlink()
    t0 = time.monotonic()
    _configure(tree, cc, objdir, fragment, version, wanted, key, log)
    if log:
        log(f"{cc}: make prepare")
    proc = _make(tree, objdir, cc, "prepare")
    if proc.returncode != 0:
        raise _fail(
            proc,
            f"make prepare with {cc} {version}",
            str(objdir),
            "install the kernel build deps (scripts/setup.sh); check the compiler supports this kernel",
        )
    if log:
        log(f"{cc}: make {' '.join(objects)}")
    # touch nothing: make rebuilds the objects only if the tree changed since the last check
    proc = _make(tree, objdir, cc, *objects)
    if proc.returncode != 0:
        raise _fail(
            proc,
            f"building {', '.join(objects)} with {cc} {version}",
            str(tree),
            "the series does not compile on this base: fix the patch or add a per-base variant",
        )
    missing = [o for o in objects if not (objdir / o).exists()]
    if missing:
        raise CompileError(
            f"make succeeded but did not produce {', '.join(missing)}",
            str(objdir),
            "check the object is built by this config (CONFIG options in the fragment)",
        )
    record = {
        "compiler": cc,
        "version": version,
        "objects": objects,
        "objdir": str(objdir),
        "warnings": warnings_of(proc.stdout + proc.stderr),
        "ok": True,
        "seconds": round(time.monotonic() - t0, 1),
        "cached": False,
    }
    stamp.write_text(json.dumps({"key": key, "ok": True, "record": record}, indent=1))
    return record
