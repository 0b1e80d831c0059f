"""The lab kernel: our own 5.10 build that kpatch-build diffs against AND that the lab VM boots.

One build serves both (docs/kpatch.md, "Why one build"): the tree is configured from x86_64_defconfig plus
kpatch/lab/config.fragment, patched with kpatch/lab/patches/*.patch (a linker-script change so a tree built with
-ffunction-sections/-fdata-sections boots), and built ONCE with kpatch-build's own make variables and KCFLAGS.
kpatch-build then reuses the tree (-s) and its "Building original source" step finds nothing to do.

The tree lives in cache_dir()/kpatch/lab/<key>/ where key = hash(source hash, config fragment, lab patches,
compiler .comment, kpatch version + KCFLAGS); a warm run finds state.json and does no work. The boot artifacts
(bzImage, vmlinux, System.map, .config) are copied to <key>/out/ so a later kpatch-build in the tree cannot
change what the VM boots.

API: lab_kernel(source_spec=None, log=print) -> LabKernel (building if needed).
CLI: python -m numaforge.kernel.labkernel [SOURCE_SPEC]   (prints the paths; builds when cold)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import paths
from ..digest import sha256_bytes
from ..errors import NumaforgeError
from ..paths import cache_dir
from ..program import prog
from . import kpatch_steps
from . import toolchain as tcm
from .kpatch_errors import KpatchError
from .source import export_tree


def lab_dir() -> Path:
    """kpatch/lab (Kconfig fragment, build fixes) of the project, else the built-in one (numaforge.paths)."""
    return paths.data_dir("kpatch", "lab")


def fragment_path() -> Path:
    return lab_dir() / "config.fragment"


DEFCONFIG = "x86_64_defconfig"
LAB_COMPILER = "gcc-10"  # bullseye's kernel compiler: the lab matches the fleet's Debian 5.10 targets
DEFAULT_SOURCE = "debian:linux-source-5.10=5.10.262-1"
STATE = "state.json"
JOBS = int(os.environ.get("NUMAFORGE_KERNEL_JOBS", "2"))


class LabKernelError(KpatchError):
    """The lab kernel cannot be configured or built."""


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
    import re

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
) -> str:
    h = hashlib.sha256()
    for part in (
        b"numaforge-lab-v1",
        source_hash.encode(),
        DEFCONFIG.encode(),
        fragment,
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
    with kpatch_steps.FileLock(inputs["root"] / ".build.lock"):  # one build per key, even with concurrent callers
        found = _cached(inputs["key"], inputs["root"])
        if found:
            return found
        return _build(**inputs, log=log)


def series_kernel(repo: Path, result_commit: str, source_hash: str, log=print) -> LabKernel:
    """The lab kernel with a backport's whole series built in: the tree of ``result_commit`` (every patch of the
    series, those kpatch cannot carry too, such as 0002's scheduler feature), configured and built exactly as the
    lab kernel is, so the two differ only in the series. Protocol amendment 7's full-kernel knob control boots it.
    Its cache key joins the source's hash with the result's git tree id (not the commit id, which changes with
    every re-application's dates)."""
    tree_id = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", f"{result_commit}^{{tree}}"], capture_output=True, text=True
    )
    if tree_id.returncode != 0:
        raise LabKernelError(
            f"cannot read the tree of the backport's result commit {result_commit[:12]}",
            str(repo),
            f"run the backport again ({prog()} backport) so its tree holds the result commit",
        )
    src = SourceRef(repo, result_commit, f"{source_hash}+series-tree:{tree_id.stdout.strip()}")
    return lab_kernel(log=log, source=src)


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
    key = lab_key(source.source_hash, fragment_path().read_bytes(), _lab_patches(), compiler, tc.version, flags, mvars)
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


def _prepare(key, tree: Path, source, env: dict, mvars: list[str], logf, log) -> None:
    """The base commit exported, the lab patches applied, defconfig + the fragment merged and checked."""
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
    log(f"lab kernel: configuring ({DEFCONFIG} + {fragment_path()})")
    _run(["make", *mvars, DEFCONFIG], tree, env, logf, "make defconfig")
    _run(
        ["scripts/kconfig/merge_config.sh", "-m", ".config", str(fragment_path())],
        tree,
        env,
        logf,
        "merge_config.sh",
    )
    _run(["make", *mvars, "olddefconfig"], tree, env, logf, "make olddefconfig")
    final = parse_fragment((tree / ".config").read_text(), str(tree / ".config"))
    bad = config_mismatches(parse_fragment(fragment_path().read_text(), str(fragment_path())), final)
    if bad:
        raise LabKernelError(
            f"Kconfig did not keep: {', '.join(bad)}",
            str(fragment_path()),
            "add the missing dependencies to the fragment or drop the option",
        )
    (tree / ".numaforge-prepared").write_text(key + "\n")


def _build(key, root: Path, source, tc, shim, compiler, flags, mvars, log) -> LabKernel:
    t0 = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    tree = root / "linux"
    out = root / "out"
    env = tcm.BuildEnv(shim, {"KCFLAGS": flags}).env()
    env.pop("KPATCH_GCC_TEMPDIR", None)
    logpath = root / "build.log"
    with open(logpath, "a") as logf:
        if not (tree / ".numaforge-prepared").exists():
            _prepare(key, tree, source, env, mvars, logf, log)
        log(
            f"lab kernel: building vmlinux, modules, bzImage with kpatch-build's flags (-j{JOBS}); "
            f"log: {logpath} (about 20 min on 2 cores, once)"
        )
        _run(["make", *mvars, f"-j{JOBS}", "vmlinux", "modules", "bzImage"], tree, env, logf, "kernel build")
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
        source.source_hash,
        built_now=True,
        build_seconds=secs,
    )
    st = lk.as_dict()
    (root / (STATE + ".tmp")).write_text(json.dumps(st, indent=1))
    os.replace(root / (STATE + ".tmp"), root / STATE)
    log(f"lab kernel: built {release} in {secs} s")
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
