"""The kpatch toolchain and the compiler: find kpatch-build and its support files, the compiler shim that makes
plain `gcc` the target's compiler (optionally through ccache/distcc/icecc), the .comment compiler identity, and
the exact KCFLAGS / make variables kpatch-build uses (a prebuilt tree must be built with the same ones)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ToolMissingError
from ..paths import cache_dir
from .kpatch_errors import SETUP_FIX

KPATCH_VERSION_WANTED = "0.9.11"


@dataclass(frozen=True)
class Toolchain:
    kpatch_build: Path  # the kpatch-build script
    version: str  # "0.9.11"
    tools_dir: Path  # libexec/kpatch: kpatch-cc, create-diff-object, ...
    data_dir: Path  # share/kpatch: patch/ (kpatch-macros.h, livepatch-patch-hook.c)

    @property
    def kpatch_cc(self) -> Path:
        return self.tools_dir / "kpatch-cc"


def toolchain(path: str | None = None) -> Toolchain:
    """Find kpatch-build (PATH or the given path) and its support dirs, as kpatch-build's find_dirs does."""
    exe = path or shutil.which("kpatch-build")
    if not exe or not Path(exe).is_file():
        raise ToolMissingError("kpatch-build not found", path or "PATH", SETUP_FIX)
    exe_p = Path(exe).resolve()
    proc = subprocess.run([str(exe_p), "--version"], capture_output=True, text=True)
    version = (proc.stdout.strip().split() or ["?"])[-1]
    script_dir = exe_p.parent
    if (script_dir / "kpatch-cc").exists():  # running from a source checkout
        tools, data = script_dir, script_dir.parent / "kmod"
    else:
        tools = (script_dir / ".." / "libexec" / "kpatch").resolve()
        data = (script_dir / ".." / "share" / "kpatch").resolve()
    for need in (tools / "kpatch-cc", tools / "create-diff-object", data / "patch"):
        if not need.exists():
            raise ToolMissingError(f"kpatch support file missing: {need}", str(exe_p), SETUP_FIX)
    return Toolchain(exe_p, version, tools, data)


def compiler_shim(gcc: str, wrapper: str | None = None) -> Path:
    """A directory holding `gcc` for the target's compiler (e.g. gcc-10), to put first on PATH.

    kpatch-build and Kbuild both call plain `gcc`; the shim makes that the target's compiler without touching
    the machine's alternatives. With `wrapper` (distcc, icecc, ccache) the shim runs `WRAPPER /path/gcc-N`, so
    compiles are distributed while Kbuild's command lines stay the same (a prebuilt tree is still reused)."""
    real = shutil.which(gcc)
    if not real:
        raise ToolMissingError(
            f"compiler {gcc} not found",
            gcc,
            "install it (gcc-10: `python -m numaforge.debian_apt install bullseye gcc-10`, done by scripts/setup.sh)",
        )
    if wrapper:
        # distcc and icecc serve only the optional --cc-wrapper, so setup installs neither (CI and the default
        # build need none); asking for one that is missing is this clear error, never a silent plain build
        wrap = shutil.which(wrapper)
        if not wrap:
            raise ToolMissingError(
                f"compiler wrapper {wrapper} not found",
                "--cc-wrapper",
                f"install it (e.g. apt-get install {wrapper}) or drop --cc-wrapper",
            )
        # the wrapper runs the plain shim's `gcc` (a symlink to the real gcc-N), not gcc-N itself: gcc names
        # itself after argv[0] in `--version`, which Kbuild records as CONFIG_CC_VERSION_TEXT; "gcc-10 (...)"
        # instead of "gcc (...)" would touch include/config/cc/version/text.h and rebuild every object of a
        # prebuilt tree when a wrapper is switched on or off
        plain = compiler_shim(gcc) / "gcc"
        d = cache_dir() / "kpatch" / "shims" / f"{gcc}+{Path(wrap).name}" / "bin"
        d.mkdir(parents=True, exist_ok=True)
        text = f'#!/bin/sh\nexec {wrap} {plain} "$@"\n'
        link = d / "gcc"
        if not link.is_file() or link.read_text() != text:
            tmp = d / ".gcc.tmp"
            tmp.write_text(text)
            tmp.chmod(0o755)
            os.replace(tmp, link)
        return d
    d = cache_dir() / "kpatch" / "shims" / gcc / "bin"
    d.mkdir(parents=True, exist_ok=True)
    link = d / "gcc"
    if not (link.is_symlink() and os.readlink(link) == real):
        tmp = d / ".gcc.tmp"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(real)
        os.replace(tmp, link)
    return d


def wrapper_env(wrapper: str | None) -> dict:
    """Environment for the compiler wrapper: ccache keeps its objects in the numaforge cache."""
    if wrapper and Path(wrapper).name == "ccache":
        return {"CCACHE_DIR": str(cache_dir() / "ccache")}
    return {}


def gcc_comment(gcc_bin_dir: Path | None, gcc: str = "gcc") -> str:
    """The 'GCC: (...) x.y.z' string the compiler writes into .comment (what kpatch-build compares)."""
    env = dict(os.environ)
    if gcc_bin_dir:
        env["PATH"] = f"{gcc_bin_dir}:{env.get('PATH', '')}"
    with tempfile.TemporaryDirectory() as td:
        c, o = Path(td) / "t.c", Path(td) / "t.o"
        c.write_text("void f(void) {}\n")
        subprocess.run([gcc, "-c", "-o", str(o), str(c)], env=env, check=True, capture_output=True)
        return comment_of(o)


def comment_of(elf: Path) -> str:
    """First 'GCC: ...' string in an ELF file's .comment section (empty if none)."""
    proc = subprocess.run(["readelf", "-p", ".comment", str(elf)], capture_output=True, text=True)
    m = re.search(r"GCC:.*", proc.stdout)
    return m.group(0).strip() if m else ""


def kcflags(tc: Toolchain, gz_none: bool = True) -> str:
    """KCFLAGS exactly as kpatch-build 0.9.11 exports them for the original/patched builds (x86_64)."""
    debug = "-gz=none" if gz_none else ""
    return f"-I{tc.data_dir}/patch -ffunction-sections -fdata-sections \t\t {debug}"


def make_vars(tc: Toolchain, cc: str = "gcc") -> list[str]:
    """make variables kpatch-build passes (CC/LD through kpatch-cc). A prebuilt tree must use the same ones,
    or Kbuild sees a changed command line and rebuilds everything."""
    return [f"CC={tc.kpatch_cc} {cc}", f"LD={tc.kpatch_cc} ld"]


@dataclass
class BuildEnv:
    """Environment for kernel makes and kpatch-build: compiler shim first on PATH, fixed build identity."""

    shim: Path | None
    extra: dict = field(default_factory=dict)

    def env(self) -> dict:
        env = dict(os.environ)
        if self.shim:
            env["PATH"] = f"{self.shim}:{env.get('PATH', '')}"
        # deterministic UTS version: a relink does not change init/version.o's inputs
        env.update(
            {
                "KBUILD_BUILD_TIMESTAMP": "Thu Jan  1 00:00:00 UTC 2026",
                "KBUILD_BUILD_USER": "numaforge",
                "KBUILD_BUILD_HOST": "lab",
                "KBUILD_BUILD_VERSION": "1",
            }
        )
        env.update(self.extra)
        return env
