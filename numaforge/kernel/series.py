"""A patch series: ``series`` file + ``NNNN-*.patch`` (git format-patch) + ``metadata.yaml``.

Pure core: parse_patch() checks a git-format-patch text (mbox header, diff headers, hunk line counts) and
returns its subject, files and hunks; load_series() reads a series directory, resolves per-base variants and
hashes every file. Errors name the file and line and say how to fix it.

metadata.yaml:
    name: sched-numa-prefer-local-fallback
    targets: ["5.10"]                 # base versions the series is for (prefix match on the tree's version)
    tested: ["5.10.262", "5.10.223"]  # informational
    patches:                          # every patch listed in `series`, with kpatch: true/false
      0001-....patch: {kpatch: true}
    variants:                         # optional per-base replacements, explicit and tested
      "5.10.223": {0001-....patch: variants/5.10.223/0001-....patch}
    compile_config: compile-check.config   # kconfig fragment for the compile check
    loaded_check: NAME-LOADED.test         # script the validate step runs on a host
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema

from .. import paths, yamlsrc
from ..digest import sha256_bytes
from ..errors import NumaforgeError

FROM_LINE = re.compile(r"^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001$")
HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")

METADATA_SCHEMA = {
    "type": "object",
    "required": ["name", "targets", "patches"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9._-]*$"},
        "description": {"type": "string"},
        "targets": {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": r"^\d+\.\d+(\.\d+)?$"}},
        "tested": {"type": "array", "items": {"type": "string"}},
        "patches": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {
                "type": "object",
                "required": ["kpatch"],
                "additionalProperties": False,
                "properties": {"kpatch": {"type": "boolean"}, "why": {"type": "string"}},
            },
        },
        "variants": {
            "type": "object",
            "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "compile_config": {"type": "string"},
        "loaded_check": {"type": "string"},
    },
}


class SeriesError(NumaforgeError):
    """The series directory, its series file or metadata is wrong."""

    exit_code = 2


class MissingPatchError(SeriesError):
    """A patch listed in the series (or a variant) does not exist."""


class CorruptPatchError(SeriesError):
    """A patch file is not a well-formed git format-patch."""


@dataclass
class Hunk:
    file: str
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    header: str
    lines: list[str]
    patch_line: int  # 1-based line of the @@ header in the patch file
    index: int  # 1-based hunk number within its file

    @property
    def preimage(self) -> list[str]:
        return [ln[1:] for ln in self.lines if ln[:1] in (" ", "-", "")]

    @property
    def postimage(self) -> list[str]:
        return [ln[1:] for ln in self.lines if ln[:1] in (" ", "+", "")]


@dataclass
class Patch:
    name: str
    path: Path
    sha256: str
    subject: str
    author: str
    files: list[str]
    hunks: list[Hunk]
    kpatch: bool = True
    variant_of: str | None = None  # the series entry this per-base variant replaces

    def hunks_for(self, file: str) -> list[Hunk]:
        return [h for h in self.hunks if h.file == file]


@dataclass
class Series:
    name: str
    dir: Path
    base_version: str | None
    patches: list[Patch]
    metadata: dict
    file_hashes: dict[str, str] = field(default_factory=dict)

    @property
    def compile_config(self) -> Path | None:
        rel = self.metadata.get("compile_config")
        return self.dir / rel if rel else None

    def touched_objects(self) -> list[str]:
        """Kernel objects to compile-check: every .c file the series touches, as .o."""
        objs: list[str] = []
        for p in self.patches:
            for f in p.files:
                if f.endswith(".c"):
                    o = f[:-2] + ".o"
                    if o not in objs:
                        objs.append(o)
        return objs


def parse_patch(text: str, where: str) -> tuple[str, str, list[str], list[Hunk]]:
    """Check a git format-patch text; returns (subject, author, files, hunks). `where` names the file."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    if not lines or not FROM_LINE.match(lines[0]):
        raise _bad(
            where, 1, "not a git format-patch file: first line must be 'From <40-hex sha> Mon Sep 17 00:00:00 2001'"
        )
    subject, author, i = _mail_header(lines, where)
    files: list[str] = []
    hunks: list[Hunk] = []
    cur_file: str | None = None
    n_in_file = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            m = re.match(r"^diff --git a/(\S+) b/(\S+)$", line)
            if not m:
                raise _bad(where, i + 1, f"malformed diff header: {line!r}")
            cur_file = m.group(2)
            files.append(cur_file)
            n_in_file = 0
            i += 1
        elif line.startswith("@@"):
            if cur_file is None:
                raise _bad(where, i + 1, f"malformed hunk header: {line!r}")
            n_in_file += 1
            hunk, i = _hunk(lines, i, cur_file, n_in_file, where)
            hunks.append(hunk)
        elif cur_file is not None and line[:1] in ("+", "-", " ") and not line.startswith(("--- ", "+++ ", "-- ")):
            raise _bad(where, i + 1, f"diff line outside any hunk in {cur_file}: {line[:60]!r}")
        else:
            i += 1
    if not files:
        raise _bad(where, len(lines) or 1, "no 'diff --git' section: the patch changes nothing")
    return subject, author, files, hunks


def _bad(where: str, lineno: int, what: str, fix: str = "regenerate it with `git format-patch`") -> CorruptPatchError:
    return CorruptPatchError(what, f"{where}:{lineno}", fix)


def _mail_header(lines: list[str], where: str) -> tuple[str, str, int]:
    """(subject without [PATCH ...], author, index of the line after the header)."""
    subject = author = None
    i = 1
    while i < len(lines) and lines[i] != "":
        if lines[i].startswith("From: "):
            author = lines[i][6:].strip()
        elif lines[i].startswith("Subject: "):
            subject = lines[i][9:].strip()
            while i + 1 < len(lines) and lines[i + 1].startswith((" ", "\t")):
                i += 1
                subject += " " + lines[i].strip()
        i += 1
    if not author:
        raise _bad(where, 2, "mail header has no 'From:' line (the patch author)")
    if not subject:
        raise _bad(where, 2, "mail header has no 'Subject:' line")
    return re.sub(r"^\[PATCH[^]]*\]\s*", "", subject), author, i


def _hunk(lines: list[str], i: int, cur_file: str, n_in_file: int, where: str) -> tuple[Hunk, int]:
    """The hunk whose header is lines[i], its body counted against the header; returns it and the next index."""
    line = lines[i]
    m = HUNK_HEADER.match(line)
    if not m:
        raise _bad(where, i + 1, f"malformed hunk header: {line!r}")
    old_len = int(m.group(2)) if m.group(2) is not None else 1
    new_len = int(m.group(4)) if m.group(4) is not None else 1
    start_line = i + 1
    name = line.split("@@")[1].strip()
    body: list[str] = []
    old_left, new_left = old_len, new_len
    i += 1
    while old_left > 0 or new_left > 0:
        if i >= len(lines):
            raise _bad(
                where,
                start_line,
                f"hunk {name} in {cur_file} is truncated: "
                f"{old_left} old / {new_left} new line(s) missing at end of file",
            )
        b = lines[i]
        tag = b[:1]
        if tag not in (" ", "", "-", "+", "\\"):
            raise _bad(
                where,
                i + 1,
                f"line inside hunk {name} of {cur_file} does not start "
                f"with ' ', '-' or '+' ({old_left} old / {new_left} new line(s) still expected): {b[:60]!r}",
            )
        old_left -= tag in (" ", "", "-")
        new_left -= tag in (" ", "", "+")
        if old_left < 0 or new_left < 0:
            raise _bad(where, start_line, f"hunk {name} of {cur_file} has more lines than its header counts")
        body.append(b)
        i += 1
    while i < len(lines) and lines[i].startswith("\\"):
        body.append(lines[i])
        i += 1
    hunk = Hunk(cur_file, int(m.group(1)), old_len, int(m.group(3)), new_len, line, body, start_line, n_in_file)
    return hunk, i


def load_patch(path: Path, name: str, kpatch: bool, where: str) -> Patch:
    if not path.is_file():
        raise MissingPatchError(f"patch file {name} does not exist", where, f"add {path} or remove the entry")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        lineno = data[: exc.start].count(b"\n") + 1
        raise CorruptPatchError(
            f"patch is not UTF-8 text (byte {exc.start})", f"{path}:{lineno}", "regenerate it with `git format-patch`"
        ) from None
    subject, author, files, hunks = parse_patch(text, str(path))
    return Patch(name, path, sha256_bytes(data), subject, author, files, hunks, kpatch)


def resolve_dir(series: str | Path) -> Path:
    p = Path(series)
    if p.is_dir():
        return p.resolve()
    found = paths.find_data("patches", str(series))  # the project's series first, then the built-in ones
    if found is not None and found.is_dir():
        return found
    cand = paths.data_dir("patches") / str(series)
    known = paths.data_names("patches", dirs=True)
    raise SeriesError(
        f"series {series!r} not found", str(cand), f"use a directory path or one of: {', '.join(known) or '(none)'}"
    )


def target_matches(version: str, targets: list[str]) -> bool:
    return any(version == t or version.startswith(t + ".") for t in targets)


def load_series(series: str | Path, base_version: str | None = None) -> Series:
    """Read and check a series directory; with base_version, apply its per-base variants."""
    d = resolve_dir(series)
    sfile, mfile = d / "series", d / "metadata.yaml"
    for f in (sfile, mfile):
        if not f.is_file():
            raise SeriesError(
                f"series directory has no {f.name} file", str(d), f"add {f.name} (see docs/kernel-backport.md)"
            )
    meta = yamlsrc.load(mfile, error=SeriesError, what="metadata.yaml", syntax="metadata.yaml is not valid YAML")
    try:
        jsonschema.validate(meta, METADATA_SCHEMA)
    except jsonschema.ValidationError as exc:
        path = "/".join(str(x) for x in exc.absolute_path) or "(top level)"
        raise SeriesError(
            f"metadata.yaml {path}: {exc.message}", str(mfile), "see the metadata format in docs/kernel-backport.md"
        ) from None
    hashes = {"series": sha256_bytes(sfile.read_bytes()), "metadata.yaml": sha256_bytes(mfile.read_bytes())}
    entries: list[tuple[str, int]] = []
    for n, raw in enumerate(sfile.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not re.fullmatch(r"\d{4}-[A-Za-z0-9._-]+\.patch", line):
            raise SeriesError(
                f"series entry {line!r} is not a NNNN-name.patch file name",
                f"{sfile}:{n}",
                "list one git format-patch file name per line",
            )
        entries.append((line, n))
    if not entries:
        raise SeriesError("series file lists no patches", str(sfile), "list the NNNN-*.patch files in order")
    listed = {e for e, _ in entries}
    for name in meta["patches"]:
        if name not in listed:
            raise SeriesError(
                f"metadata.yaml describes {name}, which the series file does not list",
                str(mfile),
                "add it to the series file or remove it from metadata.yaml",
            )
    variants = {}
    if base_version is not None:
        if not target_matches(base_version, meta["targets"]):
            raise SeriesError(
                f"series {meta['name']} is not for base {base_version}",
                str(mfile),
                f"its targets are {', '.join(meta['targets'])}; add the base only after testing it",
            )
        variants = (meta.get("variants") or {}).get(base_version, {})
    for name in variants:
        if name not in listed:
            raise SeriesError(
                f"variant for {base_version} replaces {name}, which the series does not list",
                str(mfile),
                "name a patch from the series file",
            )
    patches: list[Patch] = []
    for name, n in entries:
        info = meta["patches"].get(name)
        if info is None:
            raise SeriesError(
                f"{name} has no entry in metadata.yaml (kpatch: true/false)",
                f"{sfile}:{n}",
                f"add `{name}: {{kpatch: true}}` (or false) under patches:",
            )
        if name in variants:
            vpath = d / variants[name]
            p = load_patch(vpath, variants[name], info["kpatch"], f"{mfile} (variants/{base_version})")
            p.variant_of = name
            hashes[variants[name]] = p.sha256
        else:
            p = load_patch(d / name, name, info["kpatch"], f"{sfile}:{n}")
        hashes.setdefault(name, sha256_bytes((d / name).read_bytes()) if (d / name).is_file() else p.sha256)
        patches.append(p)
    cfg = meta.get("compile_config")
    if cfg:
        if not (d / cfg).is_file():
            raise SeriesError(f"compile_config {cfg} does not exist", str(mfile), f"add {d / cfg}")
        hashes[cfg] = sha256_bytes((d / cfg).read_bytes())
    return Series(meta["name"], d, base_version, patches, meta, dict(sorted(hashes.items())))
