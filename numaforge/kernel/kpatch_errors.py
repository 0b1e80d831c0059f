"""kpatch build errors: the exception types and the mapping of kpatch-build's output onto an actionable error
(pure: map_failure takes the text)."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..errors import NumaforgeError
from ..program import prog

SETUP_FIX = "run scripts/setup.sh (scripts/setup.d/30-kpatch.sh builds kpatch 0.9.11 from Debian's source)"


class KpatchError(NumaforgeError):
    """kpatch-build failed, or a target cannot be built (preflight)."""

    exit_code = 4


class PreflightError(KpatchError):
    """A target fails a preflight check; `fix` says what to change."""

    exit_code = 2


class KpatchBuildError(KpatchError):
    """kpatch-build failed; `kind` names the mapped cause, `log` the full log."""

    def __init__(self, what, where=None, fix=None, kind: str = "unknown", log: str | None = None):
        self.kind = kind
        self.log = log
        super().__init__(what, where, fix)


Grab = Callable[[str], list[str]]


def _gcc_mismatch(text: str, grab: Grab) -> str | None:
    if "gcc/kernel version mismatch" not in text:
        return None
    gv, kv = grab(r"^gcc version:\s*(.*)$"), grab(r"^kernel version:\s*(.*)$")
    return (
        f"compiler mismatch: kpatch-build would use {gv[0] if gv else '?'} but the target vmlinux was built "
        f"with {kv[0] if kv else '?'}"
    )


def _init_code(text: str, grab: Grab) -> str | None:
    init = grab(r"changed section (\.init\S*|\.exit\S*) not selected for inclusion")
    init += grab(r"(?:changed|new) function: (\S+)\s+.*init")
    if not init and not re.search(r"\b\.init\.(text|data)\b.*(not selected|changed)", text):
        return None
    return (
        f"the series changes init code ({', '.join(sorted(set(init))) or '.init.text'}): __init code runs "
        "only at boot and is discarded, so a live patch cannot change it"
    )


def _read_mostly(text: str, grab: Grab) -> str | None:
    if not grab(r"data section (\.data\.\.read_mostly\S*) selected for inclusion"):
        return None
    return "the series changes a __read_mostly variable (section .data..read_mostly): kpatch cannot patch data in place"


def _ancestor(text: str, grab: Grab) -> str | None:
    anc = grab(r"(invalid ancestor \S+ for \S+)")
    return f"{anc[0]}: kpatch-build cannot tell which vmlinux/module a changed object belongs to" if anc else None


def _unsupported_section(text: str, grab: Grab) -> str | None:
    uns = grab(
        r"(changed section \S+ not selected for inclusion|data section \S+ selected for inclusion|"
        r"changed section \S+ is part of a section group|new/changed group sections are not supported)"
    )
    if not uns and "unsupported section change" not in text:
        return None
    return f"unsupported section change: {'; '.join(uns[:5]) or 'see log'}"


def _text(needles: tuple[str, ...], what: str) -> Callable[[str, Grab], str | None]:
    return lambda text, grab: what if any(n in text for n in needles) else None


# (detector, fix, kind): the first detector that recognises the output names the error
_RULES: tuple[tuple[Callable[[str, Grab], str | None], str, str], ...] = (
    (
        _gcc_mismatch,
        "set `compiler:` in the target YAML to the gcc in the vmlinux .comment (install it, e.g. gcc-10 from "
        "bullseye); a live patch built with another compiler may not match the running code",
        "gcc-mismatch",
    ),
    (
        _init_code,
        "move the change out of __init/__initdata code, or mark that patch `kpatch: false` in the series "
        "metadata (it then only goes into full kernel builds)",
        "init-code",
    ),
    (
        _read_mostly,
        "drop __read_mostly from new globals and do not change existing ones; a plain new global is fine",
        "read-mostly",
    ),
    (
        _ancestor,
        "the tree and its config disagree (objects built for another config); rebuild the target tree "
        "(delete its cache dir) and make sure the patch only touches objects built into this config",
        "invalid-ancestor",
    ),
    (
        _unsupported_section,
        "kpatch can only replace whole functions: avoid changing data, struct layouts, init code or static "
        "keys in the live-patch part of the series (see docs/kpatch.md, 'What kpatch rejects')",
        "unsupported-section",
    ),
    (
        _text(("file failed to apply",), "the combined patch does not apply to the target's source tree"),
        f"run `{prog()} backport` for the target's base version, or pick the target whose source matches",
        "patch-apply",
    ),
    (
        _text(
            ("no changed objects found", "no functional changes found"),
            "kpatch-build found no functional change in the series",
        ),
        "check the series touches built-in code of this config (and is not only comments/whitespace)",
        "no-changes",
    ),
    (
        _text(
            ("unsupported jump label", "unsupported static call"),
            "the patched code uses jump labels/static calls kpatch cannot relocate",
        ),
        "use static_key_enabled() instead of static_branch_*() in the changed functions",
        "static-key",
    ),
)


def map_failure(text: str, log_path: str) -> KpatchBuildError:
    """Turn kpatch-build's output + log into an actionable error (pure: takes the text)."""
    lines = text.splitlines()

    def grab(rx: str) -> list[str]:
        return [m.group(1) for m in (re.search(rx, ln) for ln in lines) if m]

    where = f"kpatch-build log {log_path}"
    for detect, fix, kind in _RULES:
        what = detect(text, grab)
        if what:
            return KpatchBuildError(what, where, fix, kind, log_path)
    errs = grab(r"^(?:ERROR: )?(.*(?:ERROR|error).*)$")
    return KpatchBuildError(
        f"kpatch-build failed: {errs[-1] if errs else 'see log'}",
        where,
        "read the log; docs/kpatch.md lists the common causes",
        "unknown",
        log_path,
    )
