"""kpatch-build driver: toolchain discovery, per-target preflight, the build with stage progress, mapped
errors, the artifact cache and the module manifest.

Pure parts (tested without peers): parse_stage, map_failure, kcflags, make_vars, artifact_key,
preflight_config, parse_modinfo. Adapters: toolchain(), compiler_shim(), run_kpatch_build(), modinfo().
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..digest import sha256_bytes, sha256_file
from ..errors import NumaforgeError, ToolMissingError
from ..paths import cache_dir

KPATCH_VERSION_WANTED = "0.9.11"
SETUP_FIX = "run scripts/setup.sh (scripts/setup.d/30-kpatch.sh builds kpatch 0.9.11 from Debian's source)"


class KpatchError(NumaforgeError):
    """kpatch-build failed, or a target cannot be built (preflight)."""

    exit_code = 4


class PreflightError(KpatchError):
    """A target fails a preflight check; `fix` says what to change."""

    exit_code = 2


# ---------------------------------------------------------------- toolchain

@dataclass(frozen=True)
class Toolchain:
    kpatch_build: Path      # the kpatch-build script
    version: str            # "0.9.11"
    tools_dir: Path         # libexec/kpatch: kpatch-cc, create-diff-object, ...
    data_dir: Path          # share/kpatch: patch/ (kpatch-macros.h, livepatch-patch-hook.c)

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
    if (script_dir / "kpatch-cc").exists():          # running from a source checkout
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
        raise ToolMissingError(f"compiler {gcc} not found", gcc,
                               "install it (gcc-10: `python -m numaforge.debian_apt install bullseye gcc-10`, "
                               "done by scripts/setup.sh)")
    if wrapper:
        wrap = shutil.which(wrapper)
        if not wrap:
            raise ToolMissingError(f"compiler wrapper {wrapper} not found", "--cc-wrapper",
                                   f"install it (e.g. apt-get install {wrapper}) or drop --cc-wrapper")
        d = cache_dir() / "kpatch" / "shims" / f"{gcc}+{Path(wrap).name}" / "bin"
        d.mkdir(parents=True, exist_ok=True)
        text = f'#!/bin/sh\nexec {wrap} {real} "$@"\n'
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
        env.update({"KBUILD_BUILD_TIMESTAMP": "Thu Jan  1 00:00:00 UTC 2026", "KBUILD_BUILD_USER": "numaforge",
                    "KBUILD_BUILD_HOST": "lab", "KBUILD_BUILD_VERSION": "1"})
        env.update(self.extra)
        return env


# ---------------------------------------------------------------- pure: stages, failures, preflight

# kpatch-build 0.9.11 prints one line per stage on stdout; (regex, stage id, human label)
STAGES = [
    (r"^Using source directory at ", "source", "using prebuilt source tree"),
    (r"^Testing patch file", "test-patch", "testing the patch applies"),
    (r"^Reading special section data", "special-sections", "reading special sections"),
    (r"^Building original source", "build-original", "building original source"),
    (r"^Building patched source", "build-patched", "building patched source"),
    (r"^Extracting new and modified ELF sections", "extract", "extracting changed ELF sections"),
    (r"^Patched objects:", "patched-objects", "patched objects found"),
    (r"^Building patch module:", "module", "building the livepatch module"),
    (r"^SUCCESS", "done", "done"),
]
CHANGED_RE = re.compile(r"^(?P<obj>\S+\.o): (?P<kind>changed|new) function: (?P<func>\S+)\s*$")


def parse_stage(line: str) -> tuple[str, str] | None:
    for rx, sid, label in STAGES:
        if re.match(rx, line):
            return sid, label
    return None


def parse_functions(output: str) -> list[dict]:
    """[{'object': 'fair.o', 'kind': 'changed', 'function': 'task_numa_migrate.isra.0'}] from kpatch-build output."""
    seen, out = set(), []
    for line in output.splitlines():
        m = CHANGED_RE.match(line.strip())
        if m and (m["obj"], m["func"]) not in seen:
            seen.add((m["obj"], m["func"]))
            out.append({"object": m["obj"], "kind": m["kind"], "function": m["func"]})
    return out


class KpatchBuildError(KpatchError):
    """kpatch-build failed; `kind` names the mapped cause, `log` the full log."""

    def __init__(self, what, where=None, fix=None, kind: str = "unknown", log: str | None = None):
        self.kind = kind
        self.log = log
        super().__init__(what, where, fix)


def map_failure(text: str, log_path: str) -> KpatchBuildError:
    """Turn kpatch-build's output + log into an actionable error (pure: takes the text)."""
    lines = text.splitlines()

    def grab(rx: str) -> list[str]:
        return [m.group(1) for m in (re.search(rx, ln) for ln in lines) if m]

    where = f"kpatch-build log {log_path}"
    if "gcc/kernel version mismatch" in text:
        gv = grab(r"^gcc version:\s*(.*)$")
        kv = grab(r"^kernel version:\s*(.*)$")
        return KpatchBuildError(
            f"compiler mismatch: kpatch-build would use {gv[0] if gv else '?'} but the target vmlinux was built "
            f"with {kv[0] if kv else '?'}", where,
            "set `compiler:` in the target YAML to the gcc in the vmlinux .comment (install it, e.g. gcc-10 from "
            "bullseye); a live patch built with another compiler may not match the running code",
            "gcc-mismatch", log_path)
    init = grab(r"changed section (\.init\S*|\.exit\S*) not selected for inclusion")
    init += grab(r"(?:changed|new) function: (\S+)\s+.*init")
    if init or re.search(r"\b\.init\.(text|data)\b.*(not selected|changed)", text):
        return KpatchBuildError(
            f"the series changes init code ({', '.join(sorted(set(init))) or '.init.text'}): __init code runs "
            "only at boot and is discarded, so a live patch cannot change it", where,
            "move the change out of __init/__initdata code, or mark that patch `kpatch: false` in the series "
            "metadata (it then only goes into full kernel builds)", "init-code", log_path)
    rm = grab(r"data section (\.data\.\.read_mostly\S*) selected for inclusion")
    if rm:
        return KpatchBuildError(
            "the series changes a __read_mostly variable (section .data..read_mostly): kpatch cannot patch data "
            "in place", where,
            "drop __read_mostly from new globals and do not change existing ones; a plain new global is fine",
            "read-mostly", log_path)
    anc = grab(r"(invalid ancestor \S+ for \S+)")
    if anc:
        return KpatchBuildError(
            f"{anc[0]}: kpatch-build cannot tell which vmlinux/module a changed object belongs to", where,
            "the tree and its config disagree (objects built for another config); rebuild the target tree "
            "(delete its cache dir) and make sure the patch only touches objects built into this config",
            "invalid-ancestor", log_path)
    uns = grab(r"(changed section \S+ not selected for inclusion|data section \S+ selected for inclusion|"
               r"changed section \S+ is part of a section group|new/changed group sections are not supported)")
    if uns or "unsupported section change" in text:
        return KpatchBuildError(
            f"unsupported section change: {'; '.join(uns[:5]) or 'see log'}", where,
            "kpatch can only replace whole functions: avoid changing data, struct layouts, init code or static "
            "keys in the live-patch part of the series (see docs/kpatch.md, 'What kpatch rejects')",
            "unsupported-section", log_path)
    if re.search(r"file failed to apply", text):
        return KpatchBuildError(
            "the combined patch does not apply to the target's source tree", where,
            "run `invoke backport` for the target's base version, or pick the target whose source matches",
            "patch-apply", log_path)
    if "no changed objects found" in text or "no functional changes found" in text:
        return KpatchBuildError(
            "kpatch-build found no functional change in the series", where,
            "check the series touches built-in code of this config (and is not only comments/whitespace)",
            "no-changes", log_path)
    if "unsupported jump label" in text or "unsupported static call" in text:
        return KpatchBuildError(
            "the patched code uses jump labels/static calls kpatch cannot relocate", where,
            "use static_key_enabled() instead of static_branch_*() in the changed functions", "static-key",
            log_path)
    errs = grab(r"^(?:ERROR: )?(.*(?:ERROR|error).*)$")
    return KpatchBuildError(f"kpatch-build failed: {errs[-1] if errs else 'see log'}", where,
                            "read the log; docs/kpatch.md lists the common causes", "unknown", log_path)


REQUIRED_CONFIG = {
    "CONFIG_DEBUG_INFO": "kpatch-build needs DWARF to correlate symbols",
    "CONFIG_LIVEPATCH": "the module registers with the kernel's livepatch core",
    "CONFIG_DYNAMIC_FTRACE_WITH_REGS": "livepatch redirects functions through ftrace with regs",
    "CONFIG_KALLSYMS_ALL": "livepatch resolves non-exported symbols through kallsyms",
    "CONFIG_MODULES": "the live patch is a module",
}
FORBIDDEN_CONFIG = {
    "CONFIG_DEBUG_INFO_SPLIT": "kpatch-build cannot read split DWARF",
    "CONFIG_GCC_PLUGIN_RANDSTRUCT": "randomized struct layout differs per build",
    "CONFIG_GCC_PLUGIN_LATENT_ENTROPY": "the plugin changes code per build",
    "CONFIG_X86_KERNEL_IBT": "kpatch 0.9.11 does not support IBT",
}


def parse_config(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(CONFIG_\w+)=(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def preflight_config(cfg: dict[str, str], where: str) -> list[PreflightError]:
    errs = []
    for k, why in REQUIRED_CONFIG.items():
        if cfg.get(k) != "y":
            errs.append(PreflightError(f"{k} is not set ({why})", where,
                                       f"enable {k}=y in the target kernel's config and rebuild that kernel"))
    for k, why in FORBIDDEN_CONFIG.items():
        if cfg.get(k) == "y":
            errs.append(PreflightError(f"{k}=y is not supported by kpatch-build ({why})", where,
                                       f"build the target kernel without {k}"))
    return errs


def preflight_compiler(kernel_comment: str, gcc_comment_: str, compiler: str, where: str) -> list[PreflightError]:
    if not kernel_comment:
        return [PreflightError("the target vmlinux has no GCC .comment: cannot check the compiler", where,
                               "give the vmlinux with its .comment section (the -dbg package's, not a stripped one)")]
    if kernel_comment != gcc_comment_:
        return [PreflightError(f"compiler mismatch: target vmlinux built with '{kernel_comment}', {compiler} is "
                               f"'{gcc_comment_}'", where,
                               "set `compiler:` in the target YAML to the matching gcc (e.g. gcc-10) and install "
                               "it; never skip this check")]
    return []


def preflight_release(target_release: str, tree_release: str, host_releases: dict[str, str | None],
                      where: str) -> list[PreflightError]:
    """The module's vermagic release (tree) must equal the target's and every selected host's `uname -r`."""
    errs = []
    if tree_release != target_release:
        errs.append(PreflightError(f"vermagic would be '{tree_release}' but the target kernel is "
                                   f"'{target_release}'", where,
                                   "set KERNELRELEASE (Debian targets: kernel_release in the target YAML) or fix "
                                   "the target's kernel_release"))
    for host, rel in sorted(host_releases.items()):
        if rel and rel != target_release:
            errs.append(PreflightError(f"host runs {rel} but its target builds for {target_release}",
                                       f"inventory host {host}",
                                       "set the host's kernel.target to a target for its kernel, or fix "
                                       "kernel.release"))
    return errs


def preflight_disk(free_bytes: int, need_bytes: int, path: str) -> list[PreflightError]:
    if free_bytes < need_bytes:
        return [PreflightError(f"only {free_bytes / 2**30:.1f} GiB free, need {need_bytes / 2**30:.0f} GiB",
                               path, "free disk space there or point NUMAFORGE_CACHE at a larger disk")]
    return []


def preflight_toolchain(tc_version: str, where: str) -> list[PreflightError]:
    if tc_version != KPATCH_VERSION_WANTED:
        return [PreflightError(f"kpatch-build {tc_version} found, numaforge is tested with {KPATCH_VERSION_WANTED}",
                               where, SETUP_FIX)]
    return []


def module_name(series: str) -> str:
    """livepatch-<series> shortened to fit MODULE_NAME_LEN (55) with '-' only (kbuild maps it to '_')."""
    base = re.sub(r"[^A-Za-z0-9]+", "-", series).strip("-").lower()
    return ("livepatch-" + base)[:48].rstrip("-")


def artifact_key(inputs: dict) -> str:
    import json as _json

    return sha256_bytes(_json.dumps(inputs, sort_keys=True).encode())[:32]


def kpatch_command(tc: Toolchain, tree: Path, vmlinux: Path, patch: Path, name: str, outdir: Path, jobs: int,
                   config: Path | None = None) -> list[str]:
    cmd = [str(tc.kpatch_build), "-s", str(tree), "-v", str(vmlinux), "-n", name, "-o", str(outdir),
           "-j", str(jobs)]
    if config:
        cmd += ["-c", str(config)]
    return cmd + [str(patch)]


def release_makeflags(release: str | None) -> dict:
    """Env making every make of kpatch-build use KERNELRELEASE=release (a command-line variable carried in
    MAKEFLAGS), so a Debian tree (Makefile says 5.10.262) builds vermagic '5.10.0-46-amd64 ...'."""
    return {"MAKEFLAGS": f"KERNELRELEASE={release}"} if release else {}


def parse_modinfo(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^([\w.-]+):\s*(.*)$", line)
        if m and m.group(1) not in out:
            out[m.group(1)] = m.group(2).strip()
    return out


# ---------------------------------------------------------------- adapters: modinfo, kpatch-build run

def modinfo(ko: Path) -> dict[str, str]:
    exe = shutil.which("modinfo") or "/usr/sbin/modinfo"
    if not Path(exe).exists():
        raise ToolMissingError("modinfo not found", None, "apt-get install kmod (scripts/setup.d/30-kpatch.sh)")
    proc = subprocess.run([exe, str(ko)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise KpatchError(f"modinfo cannot read the module: {proc.stderr.strip()}", str(ko),
                          "the .ko is damaged; delete it and rebuild")
    return parse_modinfo(proc.stdout)


BUILD_COMMANDS = ("make", "gcc", "cc1", "as", "ld", "kpatch-cc")


def _stop_builds(proc) -> None:
    """kpatch-build (bash) defers its TERM trap until the running command ends, and a SIGTERM that lands
    between its stage echo and the fork of make never reaches make. So, until kpatch-build exits, keep
    stopping build processes (make/gcc/...) in its process group; its cleanup (patch -R, mv) is left alone."""
    import signal
    import threading

    def reap():
        while proc.poll() is None:
            for d in Path("/proc").iterdir():
                if not d.name.isdigit():
                    continue
                try:
                    stat = (d / "stat").read_text()
                except OSError:
                    continue
                comm = stat[stat.index("(") + 1:stat.rindex(")")]
                pgrp = int(stat[stat.rindex(")") + 2:].split()[2])
                if pgrp == proc.pid and comm in BUILD_COMMANDS:
                    try:
                        os.kill(int(d.name), signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            time.sleep(0.5)

    import time

    threading.Thread(target=reap, daemon=True).start()


def run_kpatch_build(cmd: list[str], env: dict, log_path: Path, on_stage=None, on_line=None,
                     stop_at: str | None = None) -> tuple[int, str, bool]:
    """Run kpatch-build in its own process group, streaming lines to the log and stage callbacks.

    Returns (exit code, captured output, stopped). With stop_at=<stage id>, kpatch-build is sent SIGTERM when
    that stage starts (its own trap restores the tree): preflight + kpatch-build's checks without a build."""
    import signal

    captured: list[str] = []
    stopped = False
    with open(log_path, "a") as logf:
        logf.write(f"$ {' '.join(cmd)}\n")
        logf.flush()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                bufsize=1, start_new_session=True, cwd=str(log_path.parent))
        try:
            for line in proc.stdout:
                logf.write(line)
                captured.append(line)
                st = parse_stage(line)
                if st and on_stage:
                    on_stage(*st)
                if on_line:
                    on_line(line.rstrip("\n"))
                if st and stop_at and st[0] == stop_at and not stopped:
                    stopped = True
                    os.killpg(proc.pid, signal.SIGTERM)
                    _stop_builds(proc)
            rc = proc.wait()
        except BaseException:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            proc.wait()
            raise
    return rc, "".join(captured), stopped


# ---------------------------------------------------------------- orchestration

DRIVER_VERSION = "1"        # bump when the build procedure changes what a module contains
DISK_NEED = 8 * 2**30


def build_root() -> Path:
    """Where modules are built, one directory per target (numaforge.paths.kpatch_build_dir)."""
    from .. import paths

    return paths.kpatch_build_dir()


@dataclass
class TargetInputs:
    """What kpatch-build gets for one target."""

    tree: Path
    vmlinux: Path
    config: Path
    release: str            # vermagic release the module will carry
    identity: dict          # hashes identifying the inputs (for the artifact key)
    config_arg: Path | None = None          # -c (Debian: the headers' .config)
    env_extra: dict = field(default_factory=dict)
    restore: Callable[..., dict] | None = None  # callable(env, logf) restoring the tree after kpatch-build


@dataclass
class KpatchResult:
    target: str
    status: str             # built | unchanged | checked
    module: Path | None
    manifest: dict
    manifest_path: Path | None
    log: Path | None
    seconds: float = 0.0


class _Lock:
    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(self.path, "w")
        fcntl.flock(self.fh, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        import fcntl

        fcntl.flock(self.fh, fcntl.LOCK_UN)
        self.fh.close()
        return False


def _source_like(bp):
    """labkernel.lab_kernel wants repo/base_commit/source_hash: take them from the backport result."""
    from types import SimpleNamespace

    return SimpleNamespace(repo=bp.tree, base_commit=bp.base_commit, source_hash=bp.source_hash)


def lab_kernel(source_spec: str | None = None, log=print):
    """For the lab VM helper: the built lab kernel (bzImage, vmlinux, release, build dir), building if needed.
    With no spec it uses the source of the latest backport for the lab's base version, else the lab target's
    source (Debian 5.10.262)."""
    from . import labkernel
    from . import targets as tg

    if source_spec is None:
        from . import backport as bpm

        lab = tg.load_target("lab")
        bp = bpm.latest(base_version=lab.base_version)
        if bp is not None:
            return labkernel.lab_kernel(log=log, source=_source_like(bp))
        source_spec = lab.source
    return labkernel.lab_kernel(source_spec, log=log)


def _lab_inputs(tc: Toolchain, bp, log) -> TargetInputs:
    from . import labkernel

    lk = labkernel.lab_kernel(log=log, tc=tc, source=_source_like(bp))

    def restore(env: dict, logf) -> dict:
        # kpatch-build reverted the source but left patched objects (fair.o, vmlinux.o, vmlinux): rebuild the
        # original with the same variables, so the tree again equals the prebuilt one (checked by hash).
        env = dict(env)
        env.pop("KPATCH_GCC_TEMPDIR", None)
        env["KCFLAGS"] = kcflags(tc)
        proc = subprocess.run(["make", *make_vars(tc), f"-j{labkernel.JOBS}", "vmlinux", "modules"], cwd=lk.tree,
                              env=env, stdout=logf, stderr=subprocess.STDOUT)
        same = proc.returncode == 0 and sha256_file(lk.tree / "vmlinux") == sha256_file(lk.vmlinux)
        return {"restored": proc.returncode == 0, "vmlinux_identical": same}

    return TargetInputs(lk.tree, lk.vmlinux, lk.config, lk.release,
                        {"lab_key": lk.key, "source_hash": lk.source_hash}, restore=restore)


def debian_tree(t, tc: Toolchain, bp, cfg: Path, shim: Path, log) -> Path:
    """A pristine copy of the base source, configured with Debian's .config (prepared once, cached)."""
    from ..paths import cache_dir

    key = sha256_bytes(f"{bp.source_hash}\0{sha256_file(cfg)}\0{t.compiler}\0{tc.version}".encode())[:16]
    root = cache_dir() / "kpatch" / "debian" / t.kernel_release / key
    tree = root / "linux"
    if (tree / ".numaforge-prepared").exists():
        return tree
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    log(f"{t.name}: extracting the base source into {tree}")
    from .source import export_tree

    if not export_tree(bp.tree, bp.base_commit, tree):
        raise KpatchError("git archive of the base commit failed", f"{bp.tree}@{bp.base_commit}",
                          "re-run `invoke backport`")
    shutil.copy2(cfg, tree / ".config")
    env = BuildEnv(shim, {"KCFLAGS": kcflags(tc)}).env()
    proc = subprocess.run(["make", *make_vars(tc), "olddefconfig"], cwd=tree, env=env, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise KpatchError(f"make olddefconfig failed: {proc.stdout[-400:]}{proc.stderr[-400:]}", str(tree),
                          "check the Debian config and the compiler")
    (tree / ".numaforge-prepared").write_text(key + "\n")
    return tree


def _debian_inputs(t, tc: Toolchain, bp, shim: Path, log) -> TargetInputs:
    from . import targets as tg

    di = tg.debian_inputs(t, log=log)
    tree = debian_tree(t, tc, bp, di.config, shim, log)
    st = di.vmlinux.stat()
    ident = {"source_hash": bp.source_hash, "config_sha256": sha256_file(di.config),
             "vmlinux": f"{t.debian['dbg_package']}={t.debian['version']}:{st.st_size}"}
    return TargetInputs(tree, di.vmlinux, di.config, t.kernel_release, ident, config_arg=di.config,
                        env_extra=release_makeflags(t.kernel_release))


def _failed(out: str, running: Path, failed: Path) -> KpatchBuildError:
    os.replace(running, failed)
    return map_failure(out + "\n" + failed.read_text(errors="replace"), str(failed))


def _ld_version() -> str:
    proc = subprocess.run(["ld", "--version"], capture_output=True, text=True)
    return proc.stdout.splitlines()[0] if proc.stdout else "?"


def build_kpatch(target_name: str = "lab", bp=None, series: str | None = None, jobs: int = 2,
                 cc_wrapper: str | None = None, host_releases: dict | None = None, log=print,
                 on_stage=None, check_only: bool = False, force: bool = False,
                 out_name: str | None = None) -> KpatchResult:
    """Build (or reuse) the live-patch module of the backported series for one target.

    bp: a numaforge.kernel.backport.BackportResult (default: the latest recorded backport of `series`).
    out_name: directory under kpatch/build/ for the module and manifest (default: the target's name); the
    measurement arms (alternatives, null control) use their own, so the shipped module stays in place."""
    import json
    import time
    from datetime import datetime, timezone

    from . import targets as tg

    t0 = time.monotonic()
    t = tg.load_target(target_name)
    if bp is None:
        from . import backport as bpm

        bp = bpm.latest(series or bpm.DEFAULT_SERIES, base_version=t.base_version)
        if bp is None:
            raise KpatchError(f"no backport output of series {series or bpm.DEFAULT_SERIES} for base "
                              f"{t.base_version} (target {t.name})", "build/backport/",
                              f"run `invoke backport --source {t.source}` first (or `invoke backport build-kpatch`)")
    if bp.base_version != t.base_version:
        raise PreflightError(f"backport is for {bp.base_version}, target {t.name} is {t.base_version}",
                             str(bp.combined_patch), f"run `invoke backport --source {t.source}`")
    if t.kind == "debian" and bp.manifest.get("source_spec") not in (None, t.source):
        raise PreflightError(f"backport source {bp.manifest.get('source_spec')} is not the Debian source of "
                             f"{t.name}", str(bp.combined_patch), f"run `invoke backport --source {t.source}`")
    if not Path(bp.combined_patch).is_file():
        raise KpatchError("the backport's combined patch is missing", str(bp.combined_patch),
                          "re-run `invoke backport`")
    series_name = bp.manifest.get("series", series or "series")
    tc = toolchain()
    where = f"target {t.name} ({t.path})"
    errs = preflight_toolchain(tc.version, str(tc.kpatch_build))
    shim = compiler_shim(t.compiler, cc_wrapper)
    comp = gcc_comment(shim)
    if t.kind == "lab":
        inputs = _lab_inputs(tc, bp, log)
    else:
        inputs = _debian_inputs(t, tc, bp, shim, log)
    errs += preflight_compiler(comment_of(inputs.vmlinux), comp, t.compiler, str(inputs.vmlinux))
    errs += preflight_config(parse_config(inputs.config.read_text()), str(inputs.config))
    errs += preflight_release(t.kernel_release, inputs.release, host_releases or {}, where)
    errs += preflight_disk(shutil.disk_usage(inputs.tree).free, DISK_NEED, str(inputs.tree))
    if errs:
        first = errs[0]
        more = "".join(f"\n  - {e.where}: {e.what} (fix: {e.fix})" for e in errs[1:])
        raise PreflightError(first.what + (f"; {len(errs) - 1} more:{more}" if more else ""), first.where, first.fix)

    patch = Path(bp.combined_patch)
    name = module_name(series_name)
    key_inputs = {
        "driver": DRIVER_VERSION, "target": Path(t.path).read_text(), "inputs": inputs.identity,
        "patch_sha256": sha256_file(patch), "module": name, "kpatch": tc.version, "compiler": comp,
        "kcflags": " ".join(kcflags(tc).split()),
    }
    key = artifact_key(key_inputs)
    outdir = build_root() / (out_name or t.name)
    mpath = outdir / "manifest.json"
    if not force and not check_only and mpath.exists():
        try:
            old = json.loads(mpath.read_text())
            ko = outdir / old["module_file"]
            if old.get("inputs_key") == key and ko.exists() and sha256_file(ko) == old["sha256"]:
                log(f"{t.name}: unchanged ({ko.name}, inputs key {key[:12]}): nothing to do")
                return KpatchResult(t.name, "unchanged", ko, old, mpath, Path(old.get("log", "")),
                                    round(time.monotonic() - t0, 2))
        except (ValueError, KeyError, OSError):
            pass

    work = cache_dir() / "kpatch" / "work" / t.name
    work.mkdir(parents=True, exist_ok=True)
    outdir.mkdir(parents=True, exist_ok=True)
    # the log of the last good build stays next to its module; a failing or --check run gets its own file
    final_log = outdir / ("kpatch-build-check.log" if check_only else "kpatch-build.log")
    log_path = outdir / ".kpatch-build.log.running"
    failed_log = outdir / "kpatch-build-failed.log"
    log_path.write_text(f"# numaforge build-kpatch {t.name} {datetime.now(timezone.utc).isoformat()}\n")
    tmp_out = Path(tempfile.mkdtemp(prefix=".out-", dir=outdir))
    env = BuildEnv(shim, {"CACHEDIR": str(work), **inputs.env_extra}).env()
    for k in ("KCFLAGS", "KCPPFLAGS", "KPATCH_GCC_TEMPDIR", "KPATCH_GCC_SRCDIR"):
        env.pop(k, None)
    cmd = kpatch_command(tc, inputs.tree, inputs.vmlinux, patch, name, tmp_out, jobs, inputs.config_arg)
    stages: list[dict] = []
    t_stage = [time.monotonic()]

    kb_log = work / "build.log"                      # kpatch-build's own log; it deletes it on success
    kb_keep = outdir / ".kpatch-build-own.log"
    kb_keep.unlink(missing_ok=True)

    def stage(sid, label):
        if not kb_keep.exists() and kb_log.exists():
            try:
                os.link(kb_log, kb_keep)             # a second name keeps the content after kpatch-build's rm
            except OSError:
                pass
        now = time.monotonic()
        if stages:
            stages[-1]["seconds"] = round(now - t_stage[0], 1)
        t_stage[0] = now
        stages.append({"stage": sid, "label": label})
        if on_stage:
            on_stage(sid, label)

    log(f"{t.name}: kpatch-build {tc.version} on {inputs.tree} (log {final_log})")
    try:
        with _Lock(inputs.tree.parent / ".kpatch-build.lock"):
            rc, out, stopped = run_kpatch_build(cmd, env, log_path, on_stage=stage,
                                                stop_at="build-original" if check_only else None)
            own = kb_keep if kb_keep.exists() else kb_log
            if own.exists():
                with open(log_path, "a") as lf:
                    lf.write("\n# ---- kpatch-build's own log (CACHEDIR/build.log) ----\n")
                    lf.write(own.read_text(errors="replace"))
            kb_keep.unlink(missing_ok=True)
            restored = None
            if inputs.restore and not stopped:
                stage("restore", "restoring the prebuilt tree")
                log(f"{t.name}: restoring the prebuilt tree (kpatch-build leaves patched objects)")
                with open(log_path, "a") as lf:
                    lf.write("\n# ---- restore: rebuild the original objects ----\n")
                    lf.flush()
                    restored = inputs.restore(BuildEnv(shim).env(), lf)
        if check_only:
            if not stopped:
                raise _failed(out, log_path, failed_log)
            os.replace(log_path, final_log)
            log_path = final_log
            shutil.rmtree(tmp_out, ignore_errors=True)
            man = {"target": t.name, "status": "checked", "command": cmd, "kernel_release": inputs.release,
                   "stages": [s["stage"] for s in stages], "log": str(log_path),
                   "env": {k: env[k] for k in ("MAKEFLAGS",) if k in env}}
            return KpatchResult(t.name, "checked", None, man, None, log_path, round(time.monotonic() - t0, 2))
        if rc != 0:
            raise _failed(out, log_path, failed_log)
        kos = sorted(tmp_out.glob("*.ko"))
        if not kos:
            raise KpatchBuildError("kpatch-build reported success but wrote no .ko", str(tmp_out),
                                   "read the log", "unknown", str(failed_log))
        ko = outdir / kos[0].name
        info = modinfo(kos[0])
        if info.get("livepatch") != "Y":
            raise KpatchBuildError(f"module is not a livepatch module (modinfo livepatch={info.get('livepatch')!r})",
                                   str(kos[0]), "the target kernel needs CONFIG_LIVEPATCH=y", "not-livepatch",
                                   str(failed_log))
        vermagic_release = info.get("vermagic", "").split(" ")[0]
        if vermagic_release != t.kernel_release:
            raise KpatchBuildError(f"module vermagic '{info.get('vermagic')}' does not match the target release "
                                   f"{t.kernel_release}", str(kos[0]),
                                   "fix kernel_release / KERNELRELEASE for this target", "vermagic", str(failed_log))
        for old_ko in outdir.glob("*.ko"):
            if old_ko.name != ko.name:
                old_ko.unlink()
        os.replace(kos[0], ko)
        os.replace(log_path, final_log)
        log_path = final_log
    finally:
        shutil.rmtree(tmp_out, ignore_errors=True)
        if log_path.name.endswith(".running") and log_path.exists():
            os.replace(log_path, failed_log)
    if stages:
        stages[-1].setdefault("seconds", round(time.monotonic() - t_stage[0], 1))
    manifest = {
        "target": t.name,
        "target_kind": t.kind,
        "module_file": ko.name,
        "module_name": info.get("name"),
        "sha256": sha256_file(ko),
        "size": ko.stat().st_size,
        "vermagic": info.get("vermagic"),
        "livepatch": info.get("livepatch"),
        "kernel_release": t.kernel_release,
        "patched_functions": parse_functions(out),
        "series": series_name,
        "series_files": bp.manifest.get("series_files", {}),
        "patches": [{"file": p.get("file"), "sha256": p.get("sha256"), "kpatch": p.get("kpatch")}
                    for p in bp.manifest.get("patches", [])],
        "combined_patch": str(patch),
        "combined_patch_sha256": key_inputs["patch_sha256"],
        "source_hash": bp.source_hash,
        "base_commit": bp.base_commit,
        "result_commit": bp.result_commit,
        "base_version": bp.base_version,
        "toolchain": {"kpatch_build": tc.version, "gcc": comp, "compiler": t.compiler, "ld": _ld_version(),
                      "cc_wrapper": cc_wrapper},
        "inputs": inputs.identity,
        "inputs_key": key,
        "tree": str(inputs.tree),
        "vmlinux": str(inputs.vmlinux),
        "restore": restored,
        "stages": stages,
        "command": cmd,
        "log": str(log_path),
        "seconds": round(time.monotonic() - t0, 1),
        "built": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    tmpm = mpath.with_name(".manifest.json.tmp")
    tmpm.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmpm, mpath)
    log(f"{t.name}: built {ko.name} ({', '.join(f['function'] for f in manifest['patched_functions']) or '-'}) "
        f"in {manifest['seconds']} s")
    return KpatchResult(t.name, "built", ko, manifest, mpath, log_path, manifest["seconds"])
