"""kpatch targets: which kernel a live patch is built for. Definitions are data (kpatch/targets/<name>.yaml) so
users add their own kernels; hosts name theirs in the inventory (host.kernel.target), default `lab`.

Pure: parse_target, group_hosts. Adapters: load_target, available, debian_inputs (downloads the Debian
headers / -dbg packages once and extracts only .config and vmlinux).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .. import debian_apt, paths, yamlsrc
from ..errors import ToolMissingError
from ..paths import cache_dir
from .kpatch_errors import PreflightError

DEFAULT_TARGET = "lab"
KINDS = ("lab", "debian")
ALLOWED = {
    "name",
    "kind",
    "kernel_release",
    "base_version",
    "compiler",
    "source",
    "description",
    "debian",
    "replace",
    "build_targets",
    "cc_wrapper",
}


class TargetError(PreflightError):
    """A target definition is missing or malformed."""

    exit_code = 2


@dataclass(frozen=True)
class Target:
    name: str
    kind: str  # lab | debian
    kernel_release: str  # what `uname -r` says on the hosts
    base_version: str  # kernel source version (Makefile), picks the backport output: 5.10.262
    compiler: str  # gcc-10 ...
    source: str  # --source SPEC of the matching kernel source
    description: str = ""
    debian: dict = field(default_factory=dict)  # version, headers_package, dbg_package (kind debian)
    path: str = ""
    replace: bool = False  # build an atomic-replace patch (kpatch-build's default); False = `kpatch-build -R`
    build_targets: tuple = ()  # kpatch-build -t TARGET... (default: kpatch-build's `vmlinux modules`)
    cc_wrapper: str | None = None  # e.g. ccache: the target gcc runs as `ccache gcc-N`


def parse_target(data, where: str) -> Target:
    """Validate one target document (already YAML-parsed)."""
    if not isinstance(data, dict):
        raise TargetError("target definition is not a mapping", where, "see kpatch/targets/lab.yaml for the shape")
    missing = [k for k in ("name", "kind", "kernel_release", "base_version", "compiler", "source") if not data.get(k)]
    if missing:
        raise TargetError(
            f"missing key(s): {', '.join(missing)}",
            where,
            "every target needs name, kind, kernel_release, base_version, compiler and source",
        )
    kind = data["kind"]
    if kind not in KINDS:
        raise TargetError(f"unknown kind {kind!r}", where, f"use one of: {', '.join(KINDS)}")
    name = str(data["name"])
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise TargetError(f"bad target name {name!r}", where, "use letters, digits, '.', '_' and '-'")
    if not re.fullmatch(r"gcc(-\d+)?", str(data["compiler"])):
        raise TargetError(f"unsupported compiler {data['compiler']!r}", where, "use gcc or gcc-N (e.g. gcc-10)")
    deb = data.get("debian") or {}
    if kind == "debian":
        need = [k for k in ("version", "headers_package", "dbg_package") if not deb.get(k)]
        if need:
            raise TargetError(
                f"debian target needs debian.{', debian.'.join(need)}",
                where,
                "add the linux-headers / -dbg package names and their version",
            )
    if not re.fullmatch(r"\d+\.\d+\.\d+", str(data["base_version"])):
        raise TargetError(
            f"bad base_version {data['base_version']!r}", where, "give the source's Makefile version, e.g. 5.10.262"
        )
    if not isinstance(data.get("replace", False), bool):
        raise TargetError(
            f"replace must be true or false, not {data['replace']!r}",
            where,
            "leave it out (non-replace, the safe default) or write `replace: true`",
        )
    bt = data.get("build_targets") or []
    if not isinstance(bt, list) or not all(isinstance(x, str) and re.fullmatch(r"[a-z_][a-z0-9_./-]*", x) for x in bt):
        raise TargetError(
            f"build_targets must be a list of make targets, not {bt!r}",
            where,
            "e.g. build_targets: [vmlinux, modules_prepare]",
        )
    wrapper = data.get("cc_wrapper")
    if wrapper is not None and wrapper not in ("ccache", "distcc", "icecc"):
        raise TargetError(f"unsupported cc_wrapper {wrapper!r}", where, "use ccache, distcc or icecc")
    unknown = set(data) - ALLOWED
    if unknown:
        raise TargetError(
            f"unknown key(s): {', '.join(sorted(unknown))}", where, f"allowed: {', '.join(sorted(ALLOWED))}"
        )
    return Target(
        name,
        kind,
        str(data["kernel_release"]),
        str(data["base_version"]),
        str(data["compiler"]),
        str(data["source"]),
        str(data.get("description", "")),
        dict(deb),
        where,
        bool(data.get("replace", False)),
        tuple(bt),
        wrapper,
    )


def available(directory: Path | None = None) -> list[str]:
    """Target names in ``directory``, else in the project's and the built-in kpatch/targets (numaforge.paths)."""
    if directory is not None:
        return sorted(p.stem for p in Path(directory).glob("*.yaml"))
    return paths.data_names("kpatch", "targets", suffix=".yaml")


def load_target(name: str, directory: Path | None = None) -> Target:
    if directory is not None:
        path = Path(directory) / f"{name}.yaml"
    else:  # the project's target overrides the built-in one of the same name
        path = (
            paths.find_data("kpatch", "targets", f"{name}.yaml") or paths.data_dir("kpatch", "targets") / f"{name}.yaml"
        )
    if not path.is_file():
        raise TargetError(
            f"unknown kpatch target {name!r}",
            str(path.parent),
            f"use one of: {', '.join(available(directory)) or '(none)'}, or add {path}",
        )
    data = yamlsrc.load(path, error=TargetError, what="kpatch target file", syntax="invalid YAML")
    t = parse_target(data, str(path))
    if t.name != name:
        raise TargetError(
            f"target file {path.name} defines name {t.name!r}",
            str(path),
            f"make the file name and `name:` agree ({t.name}.yaml)",
        )
    return t


def group_hosts(hosts, explicit: str | None = None, default: str = DEFAULT_TARGET) -> dict[str, list[str]]:
    """{target: [host names]} from host.kernel.target; --target overrides; no hosts -> {default: []}."""
    if explicit:
        return {explicit: [h.name for h in hosts]}
    out: dict[str, list[str]] = {}
    for h in hosts:
        t = (getattr(getattr(h, "kernel", None), "target", None)) or default
        out.setdefault(t, []).append(h.name)
    return out or {default: []}


# ---------------------------------------------------------------- Debian inputs (adapter)


@dataclass
class DebianInputs:
    config: Path
    vmlinux: Path
    release: str
    symvers: Path | None = None


def debian_inputs_cached(t: Target) -> bool:
    """True when debian_inputs(t) has everything on disk (nothing is downloaded: `doctor --strict` asks so)."""
    root = cache_dir() / "kpatch" / "debian" / t.kernel_release
    index = root / "inputs.json"
    if not index.is_file():
        return False
    meta = json.loads(index.read_text())
    ver = t.debian["version"]
    want = {"config": "headers_package", "vmlinux": "dbg_package", "symvers": "headers_package"}
    return all((root / w).exists() and meta.get(w) == f"{t.debian[p]}={ver}" for w, p in want.items())


def debian_inputs(t: Target, log=print, keep_debs: bool = False) -> DebianInputs:
    """Download (once) the headers and -dbg packages and extract .config and vmlinux into the cache."""

    rel = t.kernel_release
    root = cache_dir() / "kpatch" / "debian" / rel
    root.mkdir(parents=True, exist_ok=True)
    debs = cache_dir() / "kpatch" / "debian" / "debs"
    ver = t.debian["version"]
    wanted = {
        "config": (t.debian["headers_package"], f"./usr/src/linux-headers-{rel}/.config"),
        "vmlinux": (t.debian["dbg_package"], f"./usr/lib/debug/boot/vmlinux-{rel}"),
        # the exported symbols (with CRCs) of Debian's build: the module links against these, not ours
        "symvers": (t.debian["headers_package"], f"./usr/src/linux-headers-{rel}/Module.symvers"),
    }
    index = root / "inputs.json"
    meta = json.loads(index.read_text()) if index.exists() else {}
    for what, (pkg, member) in wanted.items():
        dest = root / what
        if dest.exists() and meta.get(what) == f"{pkg}={ver}":
            continue
        deb = next(iter(sorted(debs.glob(f"{pkg}_{ver.split(':')[-1]}_*.deb"))), None)
        if deb is None:
            log(f"{t.name}: downloading {pkg}={ver}" + (" (about 800 MB, once)" if what == "vmlinux" else ""))
            deb = debian_apt.download("bullseye", f"{pkg}={ver}", debs)
        log(f"{t.name}: extracting {member} from {deb.name}")
        debian_apt.extract_member(deb, member, dest, error=TargetError)
        meta[what] = f"{pkg}={ver}"
        index.write_text(json.dumps(meta, indent=1))
        if what == "vmlinux" and not keep_debs:
            deb.unlink(missing_ok=True)  # only the vmlinux is needed; the 800 MB package is not kept
    return DebianInputs(root / "config", root / "vmlinux", rel, root / "symvers")


def resolve_wrapper(t, override: str | None) -> str | None:
    """The compiler wrapper a build uses: --cc-wrapper, else the target's `cc_wrapper`. A wrapper that is named
    but not installed is an error (a target asking for ccache never builds without it silently)."""
    wrapper = override or t.cc_wrapper
    if wrapper and not shutil.which(wrapper):
        where = "--cc-wrapper" if override else f"{t.path}: cc_wrapper"
        drop = "drop --cc-wrapper" if override else f"remove `cc_wrapper: {wrapper}` from {paths.editable(t.path)}"
        raise ToolMissingError(
            f"compiler wrapper {wrapper} is not installed (target {t.name} builds through it)",
            where,
            f"install it: `apt-get install {wrapper}` (`bash scripts/setup.sh` installs ccache), or {drop}",
        )
    return wrapper
