"""The lab kernel: our own 5.10 build that kpatch-build diffs against AND that the lab VM boots.

One build serves both (docs/kpatch.md, "Why one build"): the tree is configured from x86_64_defconfig plus
kpatch/lab/config.fragment, or, with NUMAFORGE_LAB_CONFIG=tiny (issue 43, opt-in), from tinyconfig (x86_64) plus
kpatch/lab/tiny.fragment, in which every option has a one-line reason (annotated_fragment; the options "needed
by kpatch-build" or "needed by tests" are checked in the built config by `doctor --strict`); patched with
kpatch/lab/patches/*.patch (a linker-script change so a tree built with -ffunction-sections/-fdata-sections
boots), and built ONCE with kpatch-build's own make variables and KCFLAGS. kpatch-build then reuses the tree (-s)
and its "Building original source" step finds nothing to do.

The tree lives in cache_dir()/kpatch/lab/<key>/ where key = hash(source hash, base config, the fragment's option
lines (not its comments), lab patches, compiler .comment, kpatch version + KCFLAGS); a warm run finds state.json
and does no work. The boot artifacts (bzImage, vmlinux, System.map, .config) are copied to <key>/out/ so a later
kpatch-build in the tree cannot change what the VM boots.

The series kernel (series_kernel: the lab kernel with a backport's whole series built in) is an incremental
build of it: a copy of the built tree with the series applied, cached in cache_dir()/kpatch/series/<key>.

API: lab_kernel(source_spec=None, log=print) -> LabKernel (building if needed).
CLI: python -m numaforge.kernel.labkernel [SOURCE_SPEC]   (prints the paths; builds when cold)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import paths
from ..defaults import DEFAULT_LAB_CONFIG
from ..digest import sha256_bytes, sha256_file
from ..errors import NumaforgeError
from ..filelock import locked
from ..paths import cache_dir
from ..program import prog
from . import toolchain as tcm
from .kpatch_errors import KpatchError
from .source import export_tree


def lab_dir() -> Path:
    """kpatch/lab (Kconfig fragment, build fixes) of the project, else the built-in one (numaforge.paths)."""
    return paths.data_dir("kpatch", "lab")


@dataclass(frozen=True)
class LabConfig:
    """A recipe for the lab kernel's .config: `make <base>`, then the fragment merged onto it."""

    name: str
    base: tuple[str, ...]  # make arguments of the base config
    fragment: str  # file in lab_dir()
    annotated: bool  # every option carries its reason line (annotated_fragment); the key names the options only


LAB_CONFIGS = {
    # x86_64_defconfig plus a fragment that switches off what the VM never has: 1043 built-in options
    "defconfig": LabConfig("defconfig", ("x86_64_defconfig",), "config.fragment", annotated=False),
    # issue 43: tinyconfig (allnoconfig + kernel/configs/tiny.config), for x86_64 (on an x86 host allnoconfig
    # would answer the 64BIT prompt "no"), plus what the lab needs, each option with its reason: 767
    "tiny": LabConfig("tiny", ("ARCH=x86_64", "tinyconfig"), "tiny.fragment", annotated=True),
}
# tiny is opt-in until it has passed the whole kpatch and lab_vm tiers (docs/kpatch.md, "Targets"); the names and
# the default live in numaforge.defaults, which the environment check reads without importing this pipeline
# (tests/kpatch/test_core.py holds the two lists equal)
LAB_CONFIG_ENV = "NUMAFORGE_LAB_CONFIG"


def lab_config(name: str | None = None) -> LabConfig:
    """The lab config by name, else $NUMAFORGE_LAB_CONFIG, else the default."""
    name = name or os.environ.get(LAB_CONFIG_ENV) or DEFAULT_LAB_CONFIG
    if name not in LAB_CONFIGS:
        raise LabConfigError(
            f"unknown lab kernel config {name!r}",
            LAB_CONFIG_ENV,
            f"set {LAB_CONFIG_ENV} to one of: {', '.join(LAB_CONFIGS)} (or unset it: {DEFAULT_LAB_CONFIG})",
        )
    return LAB_CONFIGS[name]


def fragment_path(name: str | None = None) -> Path:
    return lab_dir() / lab_config(name).fragment


def annotated_path() -> Path:
    """The fragment whose reason lines say what kpatch-build and the tests rely on (doctor --strict's list)."""
    return lab_dir() / LAB_CONFIGS["tiny"].fragment


LAB_COMPILER = "gcc-10"  # bullseye's kernel compiler: the lab matches the fleet's Debian 5.10 targets
DEFAULT_SOURCE = "debian:linux-source-5.10=5.10.262-1"
STATE = "state.json"
JOBS_ENV = "NUMAFORGE_KERNEL_JOBS"


def jobs() -> int:
    """make -j: $NUMAFORGE_KERNEL_JOBS, else 2 (read when a build starts: a bad value used to stop the import of
    this module with a ValueError; the CLI's preflight refuses it first, numaforge.cli.environment)."""
    value = os.environ.get(JOBS_ENV) or "2"
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise LabKernelError(f"${JOBS_ENV} is {value!r}", JOBS_ENV, "set it to a whole number such as 2, or unset it")
    return n


class LabKernelError(KpatchError):
    """The lab kernel cannot be configured or built."""


class LabConfigError(LabKernelError):
    """$NUMAFORGE_LAB_CONFIG names no lab config (a bad option value)."""

    exit_code = 2


@dataclass
class LabKernel:
    key: str
    root: Path  # <cache>/kpatch/lab/<key>
    tree: Path  # the built tree (kpatch-build -s)
    bzimage: Path  # out/bzImage: what the lab VM boots
    vmlinux: Path  # out/vmlinux: the ORIGINAL vmlinux (kpatch-build -v)
    config: Path  # out/config
    release: str  # e.g. 5.10.262
    compiler: str  # gcc .comment
    source_hash: str
    built_now: bool = False
    build_seconds: float | None = None

    def as_dict(self) -> dict:
        return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class SourceRef:
    """What lab_kernel needs of a source: the repo, the commit to export (base_commit) and a hash naming its
    content; a numaforge.kernel.source.Source has the same three."""

    repo: Path
    base_commit: str
    source_hash: str


# ---------------------------------------------------------------- pure parts


def parse_fragment(text: str, where: str = "config.fragment") -> dict[str, str]:
    """{'CONFIG_X': 'y' | 'n' | '"str"' | '123'} from a Kconfig fragment ('# CONFIG_X is not set' -> 'n')."""
    out: dict[str, str] = {}
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        m = re.fullmatch(r"# (CONFIG_\w+) is not set", s)
        if m:
            out[m.group(1)] = "n"
            continue
        if not s or s.startswith("#"):
            continue
        m = re.fullmatch(r"(CONFIG_\w+)=(.*)", s)
        if not m:
            raise LabKernelError(
                f"not a Kconfig line: {s!r}", f"{where}:{no}", "write CONFIG_NAME=value or '# CONFIG_NAME is not set'"
            )
        out[m.group(1)] = m.group(2)
    return out


# The reason line each option line of the fragment is directly preceded by ("# <who>: <why>"). The options of the
# first two kinds are what kpatch-build and the tests rely on: `doctor --strict` and tests/kpatch/test_lab_config.py
# check them in the built kernel's config (relied_on), so that list is the fragment's, never a second hand list.
REASONS = ("needed by kpatch-build", "needed by tests", "needed by the lab VM", "same as the fleet")
RELIED_ON = ("needed by kpatch-build", "needed by tests")
_OPTION_RE = re.compile(r"(CONFIG_\w+)=(.*)|# (CONFIG_\w+) is not set")
_REASON_RE = re.compile(r"# (" + "|".join(map(re.escape, REASONS)) + r"): (\S.*)")


@dataclass(frozen=True)
class FragmentOption:
    name: str
    value: str  # as parse_fragment gives it ('n' for "is not set")
    who: str  # one of REASONS
    why: str
    where: str  # file:line of the option


def annotated_fragment(text: str, where: str = "config.fragment") -> list[FragmentOption]:
    """The fragment's options with their reasons; a LabKernelError at file:line for an option line without a
    reason line directly above it (or a malformed line: parse_fragment's rules)."""
    values = parse_fragment(text, where)
    out: list[FragmentOption] = []
    prev = ""
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        m = _OPTION_RE.fullmatch(s)
        if m:
            name = m.group(1) or m.group(3)
            r = _REASON_RE.fullmatch(prev)
            if not r:
                raise LabKernelError(
                    f"{name} has no reason line above it",
                    f"{where}:{no}",
                    f"put '# <who>: <why>' on the line above, <who> one of: {', '.join(REASONS)}",
                )
            out.append(FragmentOption(name, values[name], r.group(1), r.group(2), f"{where}:{no}"))
        prev = s
    return out


def relied_on(options: list[FragmentOption]) -> dict[str, str]:
    """{option: value} of the options kpatch-build and the tests rely on (RELIED_ON reasons)."""
    return {o.name: o.value for o in options if o.who in RELIED_ON}


def built_config_problems(config: Path) -> list[str]:
    """The relied-on options of the fragment that the built kernel's config does not have as the fragment says."""
    wanted = relied_on(annotated_fragment(annotated_path().read_text(), str(annotated_path())))
    return config_mismatches(wanted, parse_fragment(config.read_text(), str(config)))


def fragment_options(fragment: bytes) -> bytes:
    """The fragment's option lines, in order, without its comments: what the lab kernel's key names, so that a
    reworded reason does not rebuild the kernel (and the shared cache keeps one kernel per option set)."""
    lines = (ln.strip() for ln in fragment.decode().splitlines())
    return "\n".join(
        ln for ln in lines if ln.startswith("CONFIG_") or re.fullmatch(r"# CONFIG_\w+ is not set", ln)
    ).encode()


def config_mismatches(wanted: dict[str, str], final: dict[str, str]) -> list[str]:
    """Options of the fragment that Kconfig did not keep (dependency missing, typo...)."""
    bad = []
    for k, v in wanted.items():
        got = final.get(k, "n")
        if got != v:
            bad.append(f"{k}={v} (got {got if k in final else 'unset'})")
    return bad


def lab_key(
    source_hash: str,
    fragment: bytes,
    patches: list[tuple[str, bytes]],
    compiler: str,
    tc_version: str,
    kcflags: str,
    make_vars: list[str],
    config: LabConfig,
) -> str:
    """The lab kernel's content key. An annotated config's key names its base and the fragment's option lines (a
    reworded reason keeps the kernel); the defconfig recipe hashes the fragment's bytes, as it always did."""
    h = hashlib.sha256()
    for part in (
        b"numaforge-lab-v1",
        source_hash.encode(),
        " ".join(config.base).encode(),
        fragment_options(fragment) if config.annotated else fragment,
        compiler.encode(),
        tc_version.encode(),
        " ".join(kcflags.split()).encode(),
        "\0".join(make_vars).encode(),
    ):
        h.update(sha256_bytes(part).encode())
    for name, data in patches:
        h.update(name.encode() + b"\0" + sha256_bytes(data).encode())
    return h.hexdigest()[:20]


# ---------------------------------------------------------------- adapters


def _lab_patches() -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in sorted((lab_dir() / "patches").glob("*.patch"))]


def _source(spec: str, log):
    from . import source as src_mod

    return src_mod.prepare(spec, log=log)


def _run(cmd: list[str], cwd: Path, env: dict, logf, what: str) -> None:
    logf.write(f"\n$ {' '.join(cmd)}\n")
    logf.flush()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=logf, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise LabKernelError(
            f"{what} failed (exit {proc.returncode})",
            logf.name,
            f"read the end of the log {logf.name}; fix the tree/config and re-run",
        )


def lab_kernel(
    source_spec: str | None = None,
    log=print,
    tc: tcm.Toolchain | None = None,
    source=None,
) -> LabKernel:
    """Return the built lab kernel for the source (default Debian 5.10.262), building it once if needed.

    `source` may be a numaforge.kernel.source.Source or a SourceRef (a backport's tree and commit).
    The prebuild does not compile through the lab target's ccache: it is all misses, and the only later reader of
    its objects would be kpatch-build's first recompile of fair.o (3.5 s); kpatch-build's compiles use it."""
    inputs = _inputs(source_spec, log, tc, source)
    found = _cached(inputs["key"], inputs["root"])
    if found:
        return found
    inputs["root"].mkdir(parents=True, exist_ok=True)
    with locked(inputs["root"] / ".build.lock"):  # one build per key, even with concurrent callers
        found = _cached(inputs["key"], inputs["root"])
        if found:
            return found
        return _build(**inputs, log=log)


SERIES_LAYOUT = "numaforge-series-incremental-v1"  # the series kernel's cache recipe (kpatch/series/<key>/)


def series_key(lab_key: str, tree_id: str) -> str:
    """Content key of a series kernel: the lab kernel it is built from (its own key names the source, config,
    lab patches, compiler and flags) and the git tree id of the series' result."""
    return sha256_bytes(f"{SERIES_LAYOUT}\0{lab_key}\0{tree_id}".encode())[:20]


def series_root(key: str) -> Path:
    return cache_dir() / "kpatch" / "series" / key


def series_kernel(repo: Path, base_commit: str, result_commit: str, source_hash: str, log=print) -> LabKernel:
    """The lab kernel with a backport's whole series built in: the tree of ``result_commit`` (every patch of the
    series, those kpatch cannot carry too, such as 0002's scheduler feature), so the two differ only in the
    series. Protocol amendment 7's full-kernel knob control boots it.

    It is an incremental build of the lab kernel (``base_commit`` is the series' base, the lab kernel's source):
    a copy of the cached lab kernel's built tree (timestamps kept; the cached tree is only read), the series'
    diff applied, and the same make, so only what the changed files reach is recompiled and vmlinux relinked.
    Cached in cache_dir()/kpatch/series/<key>, key = hash(the lab kernel's key, the result's git tree id (not
    the commit id, which changes with every re-application's dates))."""
    tree_id = _git(repo, ["rev-parse", f"{result_commit}^{{tree}}"], "read the tree of the backport's result commit")
    lab_ref = SourceRef(repo, base_commit, source_hash)
    inputs = _inputs(None, log, None, lab_ref)
    key = series_key(inputs["key"], tree_id.strip())
    root = series_root(key)
    found = _cached(key, root)
    if found:
        return found
    lab = lab_kernel(log=log, source=lab_ref)
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / ".build.lock"):  # one build per key, even with concurrent callers
        found = _cached(key, root)
        if found:
            return found
        series_ref = SourceRef(repo, result_commit, f"{source_hash}+series-tree:{tree_id.strip()}")
        return _build_incremental(key, root, lab, lab_ref, series_ref, inputs, log)


def series_files(repo: Path, base_commit: str, result_commit: str) -> list[str]:
    """The files the series changes (what an incremental series kernel differs from the lab kernel in)."""
    out = _git(repo, ["diff", "--no-renames", "--name-only", base_commit, result_commit], "list the series' files")
    return sorted(out.split())


def _git(repo: Path, args: list[str], what: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise LabKernelError(
            f"cannot {what} ({' '.join(args)}): {proc.stderr.strip()[-300:]}",
            str(repo),
            f"run the backport again ({prog()} backport) so its tree holds the base and result commits",
        )
    return proc.stdout


def _relocate_tools(tree: Path, old: Path) -> int:
    """Point the build records of tools/ (objtool: built with O=<absolute tree>, so its .cmd/.d files name the
    tree's absolute path) at the copy, keeping their times. Left naming the lab tree, they make objtool rebuild,
    and every object depends on objtool: the whole kernel would be compiled again. Returns how many changed."""
    was, now, n = str(old).encode(), str(tree).encode(), 0
    for dirpath, _dirs, names in os.walk(tree / "tools"):
        for name in names:
            if not (name.startswith(".") and name.endswith((".cmd", ".d"))):
                continue
            f = Path(dirpath) / name
            data = f.read_bytes()
            if was in data:
                st = f.stat()
                f.write_bytes(data.replace(was, now))
                os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
                n += 1
    return n


def _build_incremental(key, root: Path, lab: LabKernel, lab_ref: SourceRef, series_ref: SourceRef, inputs, log):
    """Copy the lab kernel's built tree, apply the series, make: only the affected objects are rebuilt."""
    t0 = time.monotonic()
    tree = root / "linux"
    if tree.exists():  # an interrupted build: start again from the lab kernel
        shutil.rmtree(tree)
    env = tcm.BuildEnv(inputs["shim"], {"KCFLAGS": inputs["flags"]}).env()
    env.pop("KPATCH_GCC_TEMPDIR", None)
    logpath = root / "build.log"
    with open(logpath, "a") as logf:
        log(f"series kernel: copying the lab kernel's built tree {lab.tree} (key {lab.key})")
        # kpatch-build patches and restores the lab tree under this lock: copy it between two builds
        with locked(lab.root / ".kpatch-build.lock"):
            tc = time.monotonic()
            _run(["cp", "-a", "--reflink=auto", str(lab.tree), str(tree)], root, env, logf, "copying the lab tree")
        copy_s = round(time.monotonic() - tc, 1)
        moved = _relocate_tools(tree, lab.tree)
        log(f"series kernel: copied in {copy_s} s; {moved} tools/ build records pointed at the copy")
        if sha256_file(tree / "vmlinux") != sha256_file(lab.vmlinux):
            # a kpatch-build left the tree's objects patched (its restore failed): they cannot be trusted
            log("series kernel: the lab tree's vmlinux is not the lab kernel's; building from scratch instead")
            shutil.rmtree(tree)
            return _build(
                key,
                root,
                series_ref,
                inputs["tc"],
                inputs["shim"],
                inputs["compiler"],
                inputs["flags"],
                inputs["mvars"],
                log,
                inputs["config"],
            )
        files = series_files(lab_ref.repo, lab_ref.base_commit, series_ref.base_commit)
        diff = _git(
            lab_ref.repo,
            ["diff", "--no-color", "--no-renames", "--full-index", lab_ref.base_commit, series_ref.base_commit],
            "diff the series",
        )
        log(f"series kernel: applying the series ({', '.join(files)})")
        logf.write(f"\n$ git diff {lab_ref.base_commit[:12]} {series_ref.base_commit[:12]} | patch -p1\n")
        logf.flush()
        proc = subprocess.run(
            ["patch", "-p1", "--forward", "--no-backup-if-mismatch"],
            cwd=tree,
            input=diff,
            text=True,
            stdout=logf,
            stderr=subprocess.STDOUT,
        )
        if proc.returncode != 0:
            raise LabKernelError(
                f"the series does not apply to the lab kernel's tree (exit {proc.returncode})",
                str(logpath),
                "a lab patch (kpatch/lab/patches) and the series change the same lines: read the log's end",
            )
        log(f"series kernel: make vmlinux modules bzImage (-j{jobs()}; only what the series reaches); log: {logpath}")
        t1 = time.monotonic()
        _run(
            ["make", *inputs["mvars"], f"-j{jobs()}", "vmlinux", "modules", "bzImage"], tree, env, logf, "kernel build"
        )
    extra = {
        "built_from": lab.key,
        "incremental": True,
        "series_files": files,
        "copy_seconds": copy_s,
        "make_seconds": round(time.monotonic() - t1, 1),
    }
    return _finish(key, root, tree, inputs["compiler"], series_ref.source_hash, t0, log, "series kernel", extra)


def find_lab_kernel(source_spec: str | None = None) -> LabKernel | None:
    """The lab kernel of the source when it is built, else None; builds nothing (`doctor --strict` asks so)."""
    inputs = _inputs(source_spec, lambda m: None, None, None)
    return _cached(inputs["key"], inputs["root"])


def _inputs(source_spec, log, tc, source) -> dict:
    """What names a lab kernel build: the content key, its cache directory, and what _build uses."""
    tc = tc or tcm.toolchain()
    shim = tcm.compiler_shim(LAB_COMPILER)
    compiler = tcm.gcc_comment(shim)
    if source is None:
        source = _source(source_spec or DEFAULT_SOURCE, log)
    flags = tcm.kcflags(tc)
    mvars = tcm.make_vars(tc)
    config = lab_config()
    frag = lab_dir() / config.fragment
    key = lab_key(source.source_hash, frag.read_bytes(), _lab_patches(), compiler, tc.version, flags, mvars, config)
    root = cache_dir() / "kpatch" / "lab" / key
    return {
        "key": key,
        "root": root,
        "source": source,
        "tc": tc,
        "shim": shim,
        "compiler": compiler,
        "flags": flags,
        "mvars": mvars,
        "config": config,
    }


def _cached(key: str, root: Path) -> LabKernel | None:
    state = root / STATE
    if not state.exists():
        return None
    st = json.loads(state.read_text())
    lk = LabKernel(
        key,
        root,
        Path(st["tree"]),
        Path(st["bzimage"]),
        Path(st["vmlinux"]),
        Path(st["config"]),
        st["release"],
        st["compiler"],
        st["source_hash"],
        build_seconds=st.get("build_seconds"),
    )
    return lk if all(p.exists() for p in (lk.tree, lk.bzimage, lk.vmlinux)) else None


def _prepare(key, tree: Path, source, env: dict, mvars: list[str], logf, log, config: LabConfig) -> None:
    """The base commit exported, the lab patches applied, the base config + the fragment merged and checked."""
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir()
    log(f"lab kernel: extracting {source.source_hash[:19]} @ {source.base_commit[:12]} into {tree}")
    if not export_tree(source.repo, source.base_commit, tree):
        raise LabKernelError(
            "git archive of the base commit failed",
            f"{source.repo}@{source.base_commit}",
            "check the source repo (python -m numaforge.kernel.source prefetch SPEC)",
        )
    for name, _ in _lab_patches():
        log(f"lab kernel: applying {name}")
        _run(
            ["patch", "-p1", "--forward", "-i", str(lab_dir() / "patches" / name)],
            tree,
            env,
            logf,
            f"lab patch {name}",
        )
    frag = lab_dir() / config.fragment
    text = frag.read_text()
    # an annotated fragment is refused before any make when an option has no reason line
    wanted = {o.name: o.value for o in annotated_fragment(text, str(frag))} if config.annotated else {}
    log(f"lab kernel: configuring ({' '.join(config.base)} + {frag})")
    _run(["make", *mvars, *config.base], tree, env, logf, f"make {' '.join(config.base)}")
    _run(
        ["scripts/kconfig/merge_config.sh", "-m", ".config", str(frag)],
        tree,
        env,
        logf,
        "merge_config.sh",
    )
    _run(["make", *mvars, "olddefconfig"], tree, env, logf, "make olddefconfig")
    final = parse_fragment((tree / ".config").read_text(), str(tree / ".config"))
    bad = config_mismatches(wanted or parse_fragment(text, str(frag)), final)
    if bad:
        raise LabKernelError(
            f"Kconfig did not keep: {', '.join(bad)}",
            str(frag),
            "add the missing dependencies to the fragment or drop the option",
        )
    (tree / ".numaforge-prepared").write_text(key + "\n")


def _build(key, root: Path, source, tc, shim, compiler, flags, mvars, log, config: LabConfig) -> LabKernel:
    t0 = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    tree = root / "linux"
    env = tcm.BuildEnv(shim, {"KCFLAGS": flags}).env()
    env.pop("KPATCH_GCC_TEMPDIR", None)
    logpath = root / "build.log"
    with open(logpath, "a") as logf:
        if not (tree / ".numaforge-prepared").exists():
            _prepare(key, tree, source, env, mvars, logf, log, config)
        log(
            f"lab kernel: building vmlinux, modules, bzImage with kpatch-build's flags (-j{jobs()}); "
            f"log: {logpath} (about 20 min on 2 cores, once)"
        )
        _run(["make", *mvars, f"-j{jobs()}", "vmlinux", "modules", "bzImage"], tree, env, logf, "kernel build")
    return _finish(key, root, tree, compiler, source.source_hash, t0, log, "lab kernel", {})


def _finish(key, root: Path, tree: Path, compiler: str, source_hash: str, t0: float, log, what: str, extra: dict):
    """The boot artifacts copied out of the tree into out/, then state.json (written last: it marks the build)."""
    out = root / "out"
    release = (tree / "include/config/kernel.release").read_text().strip()
    out.mkdir(exist_ok=True)
    for src, dst in (
        ("arch/x86/boot/bzImage", "bzImage"),
        ("vmlinux", "vmlinux"),
        ("System.map", "System.map"),
        (".config", "config"),
    ):
        shutil.copy2(tree / src, out / (dst + ".tmp"))
        os.replace(out / (dst + ".tmp"), out / dst)
    secs = round(time.monotonic() - t0, 1)
    lk = LabKernel(
        key,
        root,
        tree,
        out / "bzImage",
        out / "vmlinux",
        out / "config",
        release,
        compiler,
        source_hash,
        built_now=True,
        build_seconds=secs,
    )
    st = {**lk.as_dict(), **extra}
    (root / (STATE + ".tmp")).write_text(json.dumps(st, indent=1))
    os.replace(root / (STATE + ".tmp"), root / STATE)
    log(f"{what}: built {release} in {secs} s")
    return lk


def main(argv: list[str]) -> int:
    try:
        lk = lab_kernel(argv[0] if argv else None, log=lambda m: print(m, flush=True))
    except NumaforgeError as exc:
        print(f"error: {exc.render()}", file=sys.stderr)
        return exc.exit_code
    print(json.dumps(lk.as_dict(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
