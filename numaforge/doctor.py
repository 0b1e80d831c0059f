"""Build-server checks for `invoke doctor`: each check probes one tool or resource and carries its fix.

Pure data in, data out: ``run_checks`` returns a list of CheckResult; the task only prints them.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import Requirement as PyRequirement

from . import paths
from .errors import NumaforgeError
from .lazy import lazy_module
from .paths import cache_dir

if TYPE_CHECKING:
    from .kernel import labkernel as labk
    from .kernel import targets as tg
    from .lab import vm
else:  # only `doctor --strict` reads the kpatch targets and the lab's cache layout (numaforge.lazy)
    tg = lazy_module("numaforge.kernel.targets")
    labk = lazy_module("numaforge.kernel.labkernel")
    vm = lazy_module("numaforge.lab.vm")

SETUP = "bash scripts/setup.sh"


@dataclass
class CheckResult:
    name: str
    pipeline: str  # kernel | firmware | lab | core
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def _version(cmd: list[str], pattern: str = r"(\d+\.\d+(?:\.\d+)?)") -> str | None:
    exe = shutil.which(cmd[0])
    if not exe:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(pattern, out.stdout + out.stderr)
    return m.group(1) if m else "present"


# (name, pipeline, command used to get a version, apt package / how to install). The pipeline is the one whose
# tasks run the tool: kernel (backport, build-kpatch: git, compilers, kpatch-build and what it calls), lab
# (lab-up/validate on the lab VM: qemu, the initramfs' busybox/dropbear/lspci, ssh-keygen for its keys).
# The firmware pipeline (bios-*) runs no external tool: Redfish over Python's TLS, SSH through paramiko.
TOOLS = [
    ("git", "kernel", ["git", "--version"], "apt-get install git"),
    ("gcc-12", "kernel", ["gcc-12", "--version"], "apt-get install gcc-12"),
    (
        "gcc-10",
        "kernel",
        ["gcc-10", "--version"],
        "python -m numaforge.debian_apt install bullseye gcc-10 (bullseye kernels are built with gcc-10)",
    ),
    ("make", "kernel", ["make", "--version"], "apt-get install make"),
    ("flex", "kernel", ["flex", "--version"], "apt-get install flex"),
    ("bison", "kernel", ["bison", "--version"], "apt-get install bison"),
    ("bc", "kernel", ["bc", "--version"], "apt-get install bc"),
    ("pahole", "kernel", ["pahole", "--version"], "apt-get install dwarves"),
    ("gawk", "kernel", ["gawk", "--version"], "apt-get install gawk"),
    ("filterdiff", "kernel", ["filterdiff", "--version"], "apt-get install patchutils"),
    ("rsync", "kernel", ["rsync", "--version"], "apt-get install rsync"),
    (
        "kpatch-build",
        "kernel",
        ["kpatch-build", "--help"],
        f"{SETUP} (builds kpatch 0.9.11 from Debian's source package)",
    ),
    ("qemu-system-x86_64", "lab", ["qemu-system-x86_64", "--version"], "apt-get install qemu-system-x86"),
    ("dropbear", "lab", ["dropbear", "-V"], "apt-get install dropbear-bin"),
    ("busybox", "lab", ["busybox"], "apt-get install busybox-static"),
    ("lspci", "lab", ["lspci", "--version"], "apt-get install pciutils"),
    ("ssh-keygen", "lab", ["ssh-keygen", "-V"], "apt-get install openssh-client"),
]
# Python distributions and the pipelines that import them (core = every task)
PY_DEPS = {
    "invoke": "core",
    "pyyaml": "core",
    "rich": "core",
    "jsonschema": "core",
    "paramiko": "core",
    "gitpython": "kernel",
    "jinja2": "firmware",
    "redfish": "firmware",
    "tenacity": "firmware",
}
MIN_FREE_GB = {"cache": 25.0}


def kvm_usable() -> bool:
    """True when /dev/kvm accepts KVM_CREATE_VM (the device node alone proves nothing)."""
    import fcntl
    import os

    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        vm = fcntl.ioctl(fd, 0xAE01, 0)  # KVM_CREATE_VM
        os.close(vm)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _wanted(pipeline: str, pipe: str) -> bool:
    return pipeline == "all" or pipe in (pipeline, "core")


def run_checks(pipeline: str = "all", path_override: str | None = None) -> list[CheckResult]:
    """The checks of ``pipeline`` (all, kernel, firmware, lab) plus the core ones every task needs."""
    results: list[CheckResult] = []
    for name, pipe, cmd, fix in TOOLS:
        if not _wanted(pipeline, pipe):
            continue
        if path_override is not None and not shutil.which(cmd[0], path=path_override):
            ver = None
        else:
            ver = _version(cmd)
        results.append(
            CheckResult(
                name,
                pipe,
                ver is not None,
                f"version {ver}" if ver else "not found",
                "" if ver else fix,
                required=pipe != "lab" or pipeline == "lab",
            )
        )
    for dist, pipe in PY_DEPS.items():
        if not _wanted(pipeline, pipe):
            continue
        try:
            results.append(CheckResult(f"python:{dist}", pipe, True, importlib.metadata.version(dist)))
        except importlib.metadata.PackageNotFoundError:
            results.append(
                CheckResult(f"python:{dist}", pipe, False, "not installed", f"{SETUP} (or pip install numaforge)")
            )
    if _wanted(pipeline, "firmware"):
        for kind in ("profiles", "vendors"):
            found = paths.data_dirs("bios", kind)
            results.append(
                CheckResult(
                    f"data:bios/{kind}",
                    "firmware",
                    bool(found),
                    ", ".join(str(d) for d in found) or "not found",
                    "" if found else "reinstall numaforge, or add bios/ to the project (--root)",
                )
            )
    if _wanted(pipeline, "kernel"):
        cache = cache_dir()
        free = shutil.disk_usage(cache).free / 1e9
        need = MIN_FREE_GB["cache"]
        results.append(
            CheckResult(
                "disk:cache",
                "kernel",
                free >= need,
                f"{free:.1f} GB free in {cache}",
                ""
                if free >= need
                else f"free at least {need:.0f} GB there or point "
                "$NUMAFORGE_CACHE at a larger disk (a 5.10 tree with debug info and kpatch-build "
                "need ~20 GB)",
            )
        )
    if _wanted(pipeline, "lab"):
        kvm = kvm_usable()
        results.append(
            CheckResult(
                "kvm",
                "lab",
                kvm,
                "available" if kvm else "absent: qemu will use TCG (slower)",
                "" if kvm else "optional; the lab VM boots under TCG in ~10-50 s",
                required=False,
            )
        )
    return results


# ---------------------------------------------------------------- --strict: what setup installs, and nothing else

PACKAGES_FILE = "scripts/packages.txt"
SOURCES = ("apt", "bullseye", "built", "cached")
# the Python distributions setup installs besides numaforge[test]: ansible for bench/bios_fleet.py
# (scripts/setup.d/60-bench.sh), and what `python -m venv` seeds every venv with
SETUP_PY_EXTRA = ("ansible",)
VENV_SEED = ("pip", "setuptools", "wheel")
KPATCH_PREFIX = "/usr/local"
STRICT_OPTIONAL = ("kvm",)  # the lab runs under TCG without it: optional even under --strict


class PackageListError(NumaforgeError):
    """scripts/packages.txt has a line that is not `tier source package commands`."""

    exit_code = 2


@dataclass(frozen=True)
class Requirement:
    tier: str
    source: str  # apt | bullseye | built | cached
    package: str  # Debian package (apt, bullseye), NAME=VERSION (built), a cache entry (cached)
    commands: tuple[str, ...]
    where: str  # file:line


def parse_packages(text: str, where: str = PACKAGES_FILE) -> list[Requirement]:
    """The lines of scripts/packages.txt: `tier source package commands` ('-' for no command). Every bad line is
    reported at once, with its file:line."""
    out: list[Requirement] = []
    bad: list[str] = []
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        parts = s.split()
        if len(parts) != 4 or parts[1] not in SOURCES:
            bad.append(f"{where}:{no}: {s!r}")
            continue
        tier, source, package, cmds = parts
        out.append(Requirement(tier, source, package, () if cmds == "-" else tuple(cmds.split(",")), f"{where}:{no}"))
    if bad:
        raise PackageListError(
            f"{len(bad)} bad line(s) in the package list: " + "; ".join(bad),
            bad[0].rsplit(": ", 1)[0],
            f"write `TIER SOURCE PACKAGE COMMANDS` with SOURCE one of {', '.join(SOURCES)} and '-' for no command",
        )
    return out


def _dpkg_installed() -> set[str]:
    """Debian packages dpkg calls installed (architecture qualifiers dropped)."""
    if not shutil.which("dpkg-query"):
        return set()
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${Status}\n"], capture_output=True, text=True, timeout=60
    )
    return {ln.split()[0] for ln in proc.stdout.splitlines() if ln.endswith(" ok installed")}


def _path_variants(path: str) -> set[str]:
    """The names dpkg may have recorded for a file: as found, resolved, and across the merged-/usr symlinks."""
    out = {path, os.path.realpath(path)}
    for p in list(out):
        for a, b in (("/usr/bin/", "/bin/"), ("/usr/sbin/", "/sbin/"), ("/usr/lib/", "/lib/")):
            if p.startswith(a):
                out.add(b + p[len(a) :])
            elif p.startswith(b):
                out.add(a + p[len(b) :])
    return out


def _package_files(package: str, info_dir: Path = Path("/var/lib/dpkg/info")) -> set[str]:
    files: set[str] = set()
    for name in (f"{package}.list", f"{package}:amd64.list", f"{package}:all.list"):
        f = info_dir / name
        if f.is_file():
            files.update(f.read_text(errors="replace").splitlines())
    return files


def command_owner_ok(path: str, package_files: set[str]) -> bool:
    """True when the file at `path` (under any of its names) belongs to the package whose file list is given."""
    return bool(_path_variants(path) & package_files)


def _requirement_checks(reqs: list[Requirement], installed: set[str]) -> list[CheckResult]:
    results = []
    for r in reqs:
        name = f"setup:{r.package}"
        fix = f"bash scripts/setup.sh (installs the `{r.tier}` tier; {r.where})"
        if r.source in ("apt", "bullseye") and r.package not in installed:
            results.append(CheckResult(name, r.tier, False, f"package {r.package} is not installed", fix))
            continue
        problems = []
        files = _package_files(r.package) if r.source in ("apt", "bullseye") else set()
        for cmd in r.commands:
            found = shutil.which(cmd)
            if not found:
                problems.append(f"{cmd} not found")
            elif r.source in ("apt", "bullseye") and not command_owner_ok(found, files):
                problems.append(f"{cmd} at {found} is not {r.package}'s (installed by hand? remove it)")
            elif r.source == "built" and not found.startswith(KPATCH_PREFIX + "/"):
                problems.append(f"{cmd} at {found}, not under {KPATCH_PREFIX} where setup builds it")
        if r.source == "built" and "=" in r.package and not problems:
            want = r.package.split("=", 1)[1]
            ver = _version([r.commands[0], "--version"])
            if ver != want:
                problems.append(f"{r.commands[0]} version {ver}, setup builds {want}")
        results.append(
            CheckResult(
                name,
                r.tier,
                not problems,
                "; ".join(problems) or f"{r.source} {r.package}: {', '.join(r.commands) or 'installed'}",
                fix if problems else "",
            )
        )
    return results


def _target_checks(reqs: list[Requirement]) -> list[CheckResult]:
    """Every kpatch target's compiler and cc_wrapper must be a command setup installs (issue 24: a target
    asked for ccache, setup never installed it, and only a hand-installed copy made the tests pass)."""
    declared = {c for r in reqs for c in r.commands}
    results = []
    for name in tg.available():
        t = tg.load_target(name)
        missing = [c for c in (t.compiler, t.cc_wrapper) if c and c not in declared]
        results.append(
            CheckResult(
                f"target:{name}",
                "kernel",
                not missing,
                f"{', '.join(missing)} not installed by setup"
                if missing
                else f"{t.compiler}, {t.cc_wrapper or 'no wrapper'}",
                f"add {', '.join(missing)} to {PACKAGES_FILE}" if missing else "",
            )
        )
    return results


def _requires_closure(roots: list[tuple[str, set[str]]]) -> set[str]:
    """Names (normalised) of the distributions `roots` [(dist, extras)] need, following installed metadata."""
    seen: set[tuple[str, frozenset]] = set()
    todo = list(roots)
    while todo:
        dist, extras = todo.pop()
        tag = (_norm(dist), frozenset(extras))
        if tag in seen:
            continue
        seen.add(tag)
        try:
            reqs = importlib.metadata.requires(dist) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for line in reqs:
            req = PyRequirement(line)
            envs = [{"extra": e} for e in extras] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((req.name, set(req.extras)))
    return {name for name, _ in seen}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _python_checks() -> list[CheckResult]:
    results = []
    base = os.path.realpath(sys.base_prefix)
    debian = base == "/usr"
    results.append(
        CheckResult(
            "python:interpreter",
            "core",
            debian,
            f"{sys.executable} on {sys.base_prefix} (Python {sys.version.split()[0]})",
            ""
            if debian
            else "the venv must be made from Debian's /usr/bin/python3: rm -rf .venv && bash scripts/setup.sh",
        )
    )
    wanted = _requires_closure([("numaforge", {"test"}), *((d, set()) for d in SETUP_PY_EXTRA)])
    wanted |= {_norm(d) for d in VENV_SEED}
    extra = sorted(
        {d.metadata["Name"] for d in importlib.metadata.distributions() if _norm(d.metadata["Name"]) not in wanted}
    )
    results.append(
        CheckResult(
            "python:venv",
            "core",
            not extra,
            f"not required by numaforge[test] or setup: {', '.join(extra)}" if extra else "only what setup installs",
            "pip uninstall them (add a dependency to pyproject.toml if numaforge needs it)" if extra else "",
        )
    )
    return results


def _cache_checks() -> list[CheckResult]:
    """The caches setup fills and the suite reads without downloading (paths only: nothing is built here)."""
    cache = cache_dir()
    probes = [
        ("cache:debian-lab-kernel", vm.debian_kernel_root() / ".complete", "scripts/setup.d/40-lab-vm.sh"),
        ("cache:irqbalance", cache / "hostos/irqbalance/usr/sbin/irqbalance", "scripts/setup.d/47-hostos.sh"),
    ]
    lab = labk.find_lab_kernel()
    probes.append(
        (
            "cache:lab-kernel",
            lab.bzimage if lab else cache / "kpatch/lab/<key>/out/bzImage",
            "scripts/setup.d/35-kernel-caches.sh",
        )
    )
    for v in ("5.10.262-1", "5.10.223-1"):
        probes.append(
            (
                f"cache:linux-source-5.10={v}",
                cache / "kernel/debian" / f"linux-source-5.10_{v}.json",
                "scripts/setup.d/20-kernel-toolchain.sh",
            )
        )
    rows = [
        CheckResult(
            name, "cache", p.exists(), str(p) if p.exists() else f"{p} missing", "" if p.exists() else f"bash {how}"
        )
        for name, p, how in probes
    ]
    if lab:
        rows.append(lab_config_check(lab.config))
    for name in tg.available():
        t = tg.load_target(name)
        if t.kind == "debian":
            ok = tg.debian_inputs_cached(t)
            rows.append(
                CheckResult(
                    f"cache:kpatch-target:{name}",
                    "cache",
                    ok,
                    "headers .config, Module.symvers and the -dbg vmlinux" if ok else "not downloaded",
                    "" if ok else "bash scripts/setup.d/35-kernel-caches.sh",
                )
            )
    return rows


def lab_config_check(config: Path) -> CheckResult:
    """The options kpatch-build and the tests rely on (the fragment's "needed by kpatch-build"/"needed by tests"
    lines) are set in the built lab kernel's config."""
    name, frag = "cache:lab-kernel-config", labk.annotated_path()
    try:
        wanted = labk.relied_on(labk.annotated_fragment(frag.read_text(), str(frag)))
        bad = labk.built_config_problems(config)
    except NumaforgeError as exc:
        return CheckResult(name, "cache", False, f"{exc.where}: {exc.what}", exc.fix or "")
    except OSError as exc:
        return CheckResult(
            name, "cache", False, f"{config}: {exc.strerror}", "bash scripts/setup.d/35-kernel-caches.sh"
        )
    if bad:
        return CheckResult(
            name,
            "cache",
            False,
            f"{config} lacks what the fragment says: {', '.join(bad)}",
            f"rebuild the lab kernel: remove {config.parent.parent} and run bash scripts/setup.d/35-kernel-caches.sh",
        )
    return CheckResult(name, "cache", True, f"the {len(wanted)} options kpatch-build and the tests rely on are set")


def strict_checks(root: Path | None = None) -> list[CheckResult]:
    """`doctor --strict`: everything the test suite needs is there AND came from setup (scripts/packages.txt,
    pyproject.toml's test extra, setup's caches), so a green run here is a green run on a fresh machine."""
    path = (root or paths.ROOT) / PACKAGES_FILE
    if not path.is_file():
        return [
            CheckResult(
                "setup:packages",
                "core",
                False,
                f"{path} not found: --strict checks a numaforge checkout",
                "run it from a clone of the repository",
            )
        ]
    reqs = parse_packages(path.read_text(), str(path))
    return [
        *_requirement_checks(reqs, _dpkg_installed()),
        *_target_checks(reqs),
        *_python_checks(),
        *_cache_checks(),
    ]
