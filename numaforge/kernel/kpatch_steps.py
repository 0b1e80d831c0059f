"""kpatch-build steps: stage parsing, preflight verdicts (config, compiler, release, disk, toolchain), the command
line, modinfo, and the run of kpatch-build in its own process group with stage callbacks.

Pure: parse_stage, parse_functions, preflight_*, module_name, artifact_key, kpatch_command, release_makeflags,
parse_modinfo. Adapters: modinfo(), run_kpatch_build().
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from ..digest import sha256_bytes
from ..errors import ToolMissingError
from .kpatch_errors import SETUP_FIX, KpatchError, PreflightError
from .toolchain import KPATCH_VERSION_WANTED, Toolchain

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
            errs.append(
                PreflightError(
                    f"{k} is not set ({why})",
                    where,
                    f"enable {k}=y in the target kernel's config and rebuild that kernel",
                )
            )
    for k, why in FORBIDDEN_CONFIG.items():
        if cfg.get(k) == "y":
            errs.append(
                PreflightError(
                    f"{k}=y is not supported by kpatch-build ({why})", where, f"build the target kernel without {k}"
                )
            )
    return errs


def preflight_compiler(kernel_comment: str, gcc_comment_: str, compiler: str, where: str) -> list[PreflightError]:
    if not kernel_comment:
        return [
            PreflightError(
                "the target vmlinux has no GCC .comment: cannot check the compiler",
                where,
                "give the vmlinux with its .comment section (the -dbg package's, not a stripped one)",
            )
        ]
    if kernel_comment != gcc_comment_:
        return [
            PreflightError(
                f"compiler mismatch: target vmlinux built with '{kernel_comment}', {compiler} is '{gcc_comment_}'",
                where,
                "set `compiler:` in the target YAML to the matching gcc (e.g. gcc-10) and install "
                "it; never skip this check",
            )
        ]
    return []


def preflight_release(
    target_release: str, tree_release: str, host_releases: dict[str, str | None], where: str
) -> list[PreflightError]:
    """The module's vermagic release (tree) must equal the target's and every selected host's `uname -r`."""
    errs = []
    if tree_release != target_release:
        errs.append(
            PreflightError(
                f"vermagic would be '{tree_release}' but the target kernel is '{target_release}'",
                where,
                "set KERNELRELEASE (Debian targets: kernel_release in the target YAML) or fix "
                "the target's kernel_release",
            )
        )
    for host, rel in sorted(host_releases.items()):
        if rel and rel != target_release:
            errs.append(
                PreflightError(
                    f"host runs {rel} but its target builds for {target_release}",
                    f"inventory host {host}",
                    "set the host's kernel.target to a target for its kernel, or fix kernel.release",
                )
            )
    return errs


def preflight_disk(free_bytes: int, need_bytes: int, path: str) -> list[PreflightError]:
    if free_bytes < need_bytes:
        return [
            PreflightError(
                f"only {free_bytes / 2**30:.1f} GiB free, need {need_bytes / 2**30:.0f} GiB",
                path,
                "free disk space there or point NUMAFORGE_CACHE at a larger disk",
            )
        ]
    return []


def preflight_toolchain(tc_version: str, where: str) -> list[PreflightError]:
    if tc_version != KPATCH_VERSION_WANTED:
        return [
            PreflightError(
                f"kpatch-build {tc_version} found, numaforge is tested with {KPATCH_VERSION_WANTED}", where, SETUP_FIX
            )
        ]
    return []


def module_name(series: str) -> str:
    """livepatch-<series> shortened to fit MODULE_NAME_LEN (55) with '-' only (kbuild maps it to '_')."""
    base = re.sub(r"[^A-Za-z0-9]+", "-", series).strip("-").lower()
    return ("livepatch-" + base)[:48].rstrip("-")


def artifact_key(inputs: dict) -> str:
    return sha256_bytes(json.dumps(inputs, sort_keys=True).encode())[:32]


PATCH_DIRS = "patch-dirs"


def patch_dirs(patch_text: str) -> list[str]:
    """The directories (as make targets, 'kernel/sched/') of the files a patch changes, minimal: a directory
    already covered by a parent in the set is dropped (make recurses)."""
    dirs = set()
    for line in patch_text.splitlines():
        if line.startswith("+++ ") or line.startswith("--- "):
            path = line[4:].split("\t")[0].strip()
            if path == "/dev/null":
                continue
            path = path.split("/", 1)[1] if path.startswith(("a/", "b/")) else path
            if "/" in path:
                dirs.add(path.rsplit("/", 1)[0] + "/")
    return sorted(d for d in dirs if not any(d != o and d.startswith(o) for o in dirs))


def expand_build_targets(targets, patch_text: str) -> list[str]:
    """Target YAML build_targets -> make targets; `patch-dirs` becomes the directories the patch touches
    (kpatch-build then builds those directories' objects and built-in.a instead of the whole vmlinux: the
    target vmlinux for symbols is the distribution's -dbg one)."""
    out: list[str] = []
    for t in targets:
        for x in patch_dirs(patch_text) if t == PATCH_DIRS else [t]:
            if x not in out:
                out.append(x)
    return out


def kpatch_command(
    tc: Toolchain,
    tree: Path,
    vmlinux: Path,
    patch: Path,
    name: str,
    outdir: Path,
    jobs: int,
    config: Path | None = None,
    replace: bool = False,
    build_targets=(),
) -> list[str]:
    """kpatch-build's command line. Non-replace (-R) unless the target asks for replace: a replace-mode patch
    disables every other live patch on the host when it loads."""
    cmd = [str(tc.kpatch_build), "-s", str(tree), "-v", str(vmlinux), "-n", name, "-o", str(outdir), "-j", str(jobs)]
    if not replace:
        cmd.append("-R")
    for t in build_targets:
        cmd += ["-t", t]
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
        raise KpatchError(
            f"modinfo cannot read the module: {proc.stderr.strip()}",
            str(ko),
            "the .ko is damaged; delete it and rebuild",
        )
    return parse_modinfo(proc.stdout)


BUILD_COMMANDS = ("make", "gcc", "cc1", "as", "ld", "kpatch-cc")


def _stop_builds(proc) -> None:
    """kpatch-build (bash) defers its TERM trap until the running command ends, and a SIGTERM that lands
    between its stage echo and the fork of make never reaches make. So, until kpatch-build exits, keep
    stopping build processes (make/gcc/...) in its process group; its cleanup (patch -R, mv) is left alone."""

    def reap():
        while proc.poll() is None:
            for d in Path("/proc").iterdir():
                if not d.name.isdigit():
                    continue
                try:
                    stat = (d / "stat").read_text()
                except OSError:
                    continue
                comm = stat[stat.index("(") + 1 : stat.rindex(")")]
                pgrp = int(stat[stat.rindex(")") + 2 :].split()[2])
                if pgrp == proc.pid and comm in BUILD_COMMANDS:
                    try:
                        os.kill(int(d.name), signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            time.sleep(0.5)

    threading.Thread(target=reap, daemon=True).start()


def run_kpatch_build(
    cmd: list[str], env: dict, log_path: Path, on_stage=None, on_line=None, stop_at: str | None = None
) -> tuple[int, str, bool]:
    """Run kpatch-build in its own process group, streaming lines to the log and stage callbacks.

    Returns (exit code, captured output, stopped). With stop_at=<stage id>, kpatch-build is sent SIGTERM when
    that stage starts (its own trap restores the tree): preflight + kpatch-build's checks without a build."""
    captured: list[str] = []
    stopped = False
    with open(log_path, "a") as logf:
        logf.write(f"$ {' '.join(cmd)}\n")
        logf.flush()
        proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
            cwd=str(log_path.parent),
        )
        assert proc.stdout is not None  # stdout=PIPE
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
