"""A built live-patch module as numaforge checks it before any host sees it: modinfo, vermagic, signature,
the patched functions and the series' LOADED check."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import yamlsrc
from ..paths import find_data
from ..program import prog
from .errors import ArtifactError, LivepatchError

SIG_MARK = b"~Module signature appended~\n"


@dataclass
class Artifact:
    path: Path
    name: str  # module name as the kernel sees it (dashes -> underscores)
    vermagic: str
    sha256: str
    signed: bool
    functions: list[str] = field(default_factory=list)  # expected patched functions ([] = any)
    check_script: Path | None = None
    series: str | None = None
    replace: bool | None = None  # atomic-replace patch (supersedes every other live patch); None = unknown
    signer: str | None = None  # the signing key's subject (manifest), None = unsigned or unknown

    @property
    def release(self) -> str:
        return self.vermagic.split()[0] if self.vermagic else ""

    def as_dict(self) -> dict:
        return {
            "file": str(self.path),
            "module": self.name,
            "vermagic": self.vermagic,
            "sha256": self.sha256,
            "signed": self.signed,
            "functions": self.functions,
            "check_script": str(self.check_script) if self.check_script else None,
            "series": self.series,
            "replace": self.replace,
            "signer": self.signer,
        }


def modinfo(data: bytes) -> dict[str, str]:
    """key=value strings of a module's .modinfo section (first occurrence wins), read from the raw .ko bytes."""
    info: dict[str, str] = {}
    for m in re.finditer(rb"(?<=\0)(vermagic|name|livepatch|license|srcversion|depends)=([^\0]*)\0", data):
        info.setdefault(m.group(1).decode(), m.group(2).decode(errors="replace"))
    return info


def load_artifact(
    ko: str | Path,
    functions: list[str] | None = None,
    check_script: str | Path | None = None,
    manifest: str | Path | None = None,
) -> Artifact:
    """A module file, with expectations from its kpatch manifest.json (next to it) when there is one."""
    ko = Path(ko)
    if not ko.is_file():
        raise ArtifactError(
            f"module file {ko} does not exist", "--module", f"build it first (`{prog()} build-kpatch`) or fix the path"
        )
    data = ko.read_bytes()
    info = modinfo(data)
    if "vermagic" not in info:
        raise ArtifactError(
            f"{ko} has no vermagic in .modinfo (not a kernel module?)",
            str(ko),
            "pass a .ko built for the host's kernel",
        )
    name = (info.get("name") or ko.stem).replace("-", "_")
    if info.get("livepatch") != "Y":
        raise ArtifactError(
            f'{ko} is not a live patch (no MODULE_INFO(livepatch, "Y"))',
            str(ko),
            "build it with kpatch-build or as a klp module",
        )
    mpath = Path(manifest) if manifest else ko.with_name("manifest.json")
    series = None
    replace = signer = None
    funcs = list(functions or [])
    if mpath.is_file():
        try:
            man = json.loads(mpath.read_text())
        except ValueError as exc:
            raise ArtifactError(f"manifest {mpath} is not JSON: {exc}", str(mpath), "rebuild the module") from None
        sha = hashlib.sha256(data).hexdigest()
        if man.get("sha256") and man["sha256"] != sha:
            raise ArtifactError(
                f"{ko.name} sha256 {sha[:12]}... differs from its manifest ({man['sha256'][:12]}...)",
                str(mpath),
                "the module was changed after the build; rebuild it",
            )
        series = man.get("series")
        replace = man.get("replace") if isinstance(man.get("replace"), bool) else None
        signer = (man.get("signature") or {}).get("signer")
        if not funcs:
            funcs = [f["function"] if isinstance(f, dict) else str(f) for f in man.get("patched_functions", [])]
        if check_script is None and series:
            check_script = _series_check(series)
    return Artifact(
        ko,
        name,
        info["vermagic"],
        hashlib.sha256(data).hexdigest(),
        data.endswith(SIG_MARK),
        funcs,
        Path(check_script) if check_script else None,
        series,
        replace,
        signer,
    )


def _series_check(series: str) -> Path | None:
    meta = find_data("patches", series, "metadata.yaml")
    if meta is None or not meta.is_file():
        return None
    doc = yamlsrc.load(meta, error=LivepatchError, what="series metadata", empty={}) or {}
    name = doc.get("loaded_check")
    return (meta.parent / name) if name and (meta.parent / name).is_file() else None
