"""The NUMAFORGE_* environment variables numaforge reads, each checked before the first host like an option value
(issue 40): a value that cannot be used is a usage error (exit 2) naming the variable, never a traceback and never
a silent default.

:data:`CHECKS` holds one check per variable the code reads (tests/hostile/test_environment.py finds every
``NUMAFORGE_...`` name in numaforge/ and fails for one without a check here). :func:`check_environment` runs them
all; the task wrapper (numaforge.cli.optionsets) calls it in the one preflight of every task, for the `invoke` and
the `numaforge` entry points alike. What each variable means: docs/operating.md ("Environment").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Collection, Mapping

from .. import paths
from ..defaults import DEFAULT_LAB_CONFIG, LAB_CONFIG_NAMES
from ..errors import NumaforgeError
from ..textsafe import has_control, printable

MAX_CHARS = 4096  # PATH_MAX, as for an option value (numaforge.cli.values.MAX_OPTION_CHARS)


class EnvironmentValueError(NumaforgeError):
    """A NUMAFORGE_* environment variable holds a value that cannot be used."""

    exit_code = 2
    refusal = True


def _error(var: str, what: str, fix: str) -> EnvironmentValueError:
    return EnvironmentValueError(f"${var} {what}", var, fix)


def _text(var: str, value: str) -> None:
    """Every variable: set means a value (an empty one is refused, as `--root ''` is), printable, bounded."""
    if not value.strip():
        raise _error(var, "is set but empty", f"set it to a value or unset it (unset {var})")
    if has_control(value) or "\n" in value or "\t" in value:
        raise _error(var, f"holds control characters ({printable(value[:80])!r})", f"set {var} to printable characters")
    if len(value) > MAX_CHARS:
        raise _error(var, f"is {len(value)} characters long; the limit is {MAX_CHARS}", f"set {var} to a shorter value")


def project_dir(var: str, value: str) -> None:
    """An existing directory: the project directory (numaforge.paths.directory_check, as for --root)."""
    _, problem = paths.directory_check(value)
    if problem not in ("", "file", "missing"):  # a link loop, a name too long
        raise _error(var, f"({printable(value)}) cannot be used: {problem}", f"set {var} to a directory")
    if problem:
        what = "is a file, not a directory" if problem == "file" else "does not exist"
        raise _error(
            var,
            f"names {printable(value)}, which {what}",
            f"set {var} to the directory holding your bios/, inventory/, patches/ or kpatch/targets/, "
            f"or unset it (unset {var}; --root DIR overrides it)",
        )


def output_dir(var: str, value: str) -> None:
    """A directory numaforge creates or writes into: an absolute path (a relative one would move with the current
    directory: two runs from two directories would not share locks or journals) that is a directory or can be
    made one -- no part of it is a file or a link to nothing. Nothing is created here."""
    p = Path(value).expanduser()
    if not p.is_absolute():
        raise _error(
            var,
            f"is a relative path ({printable(value)}): it would change with the current directory",
            f"set {var} to an absolute path, e.g. {var}=$PWD/{printable(value)}",
        )
    for part in [p, *p.parents]:
        if os.path.lexists(part):
            if part.is_dir():
                return
            kind = (
                f"a symbolic link to {printable(os.readlink(part))}, which is not a directory"
                if part.is_symlink()
                else "a file, not a directory"
            )
            where = "" if part == p else f" (in {printable(value)})"
            raise _error(
                var,
                f"cannot be used: {printable(str(part))} is {kind}{where}",
                f"set {var} to a directory numaforge may create, or remove {printable(str(part))}",
            )


def switch(var: str, value: str) -> None:
    """1 turns it on; 0 (or unset) leaves it off. Any other word (`true`, `yes`) is refused: it used to be read as
    off without a word."""
    if value.strip() not in ("0", "1"):
        raise _error(var, f"is {printable(value[:80])!r}; it takes 1 (on) or 0 (off)", f"set {var}=1, or unset it")


def positive_int(var: str, value: str) -> None:
    try:
        n = int(value.strip())
    except ValueError:
        n = 0
    if n < 1 or n > 1024:
        raise _error(var, f"is {printable(value[:80])!r}; it takes a whole number from 1 to 1024", f"set e.g. {var}=2")


def inventory(var: str, value: str) -> None:
    """`lab`, or an inventory file (the current directory's, else the project directory's), as --inventory."""
    if value == "lab":
        return
    p = Path(value).expanduser()
    candidates = [p] if p.is_absolute() else [p, paths.project_dir() / p]
    try:
        found = any(c.exists() or c.is_symlink() for c in candidates)
    except OSError:
        found = False
    if not found:
        raise _error(
            var,
            f"names {printable(value[:200])}: inventory file not found",
            f"set {var} to an inventory file or `lab`, or unset it (--inventory overrides it)",
        )


def lab_config(var: str, value: str) -> None:
    """One of the lab kernel's config recipes (numaforge.kernel.labkernel.LAB_CONFIGS, named in numaforge.defaults)."""
    if value not in LAB_CONFIG_NAMES:
        raise _error(
            var,
            f"names lab kernel config {printable(value[:80])!r}, which does not exist",
            f"set {var} to one of: {', '.join(LAB_CONFIG_NAMES)} (or unset it: {DEFAULT_LAB_CONFIG})",
        )


Check = Callable[[str, str], None]

# every NUMAFORGE_* variable the code reads -> its check (the module and what it is for)
CHECKS: Mapping[str, Check] = {
    "NUMAFORGE_ROOT": project_dir,  # numaforge.paths.project_dir: the project directory
    "NUMAFORGE_STATE": output_dir,  # numaforge.paths.state_dir (locks, journals, the lab), numaforge.hostlock
    "NUMAFORGE_BUILD": output_dir,  # numaforge.paths.build_dir
    "NUMAFORGE_KPATCH_BUILD": output_dir,  # numaforge.paths.kpatch_build_dir
    "NUMAFORGE_CACHE": output_dir,  # numaforge.paths.cache_dir
    "NUMAFORGE_REDFISH_CACHE": output_dir,  # numaforge.bios.discovery.discovery_dir
    "NUMAFORGE_KERNEL_JOBS": positive_int,  # numaforge.kernel.labkernel.jobs: make -j
    "NUMAFORGE_LAB_CONFIG": lab_config,  # numaforge.kernel.labkernel.lab_config: the lab kernel's recipe
    "NUMAFORGE_DEBUG": switch,  # numaforge.cli.common: -v
    "NUMAFORGE_REDFISH_LOG": switch,  # numaforge.bios.deadline: the redfish library's log (masked)
    "NUMAFORGE_ALLOW_READABLE_SECRET_FILES": switch,  # numaforge.safeio.read_input
    "NUMAFORGE_INVENTORY": inventory,  # numaforge.cli.common.inventory_path
}

# NUMAFORGE_CFG_<KEY>: invoke's config from the environment (numaforge.cli.main.NumaforgeConfig.env_prefix), read
# and cast by invoke itself before any task runs; not a variable of numaforge's
ENV_PREFIX = "NUMAFORGE_CFG"


def check_environment(overridden: Collection[str] = ()) -> None:
    """Every NUMAFORGE_* variable that is set, checked (:data:`CHECKS`); the first bad one raises
    EnvironmentValueError (exit 2) naming it. ``overridden``: variables an option replaces in this run (--root or
    the config's numaforge.root for $NUMAFORGE_ROOT, --inventory for $NUMAFORGE_INVENTORY): not used, not checked."""
    for var, check in CHECKS.items():
        value = os.environ.get(var)
        if value is None or var in overridden or (check is switch and value == ""):
            continue  # an empty switch is off, as unset
        _text(var, value)
        check(var, value)


def root_problem() -> EnvironmentValueError | None:
    """The error for $NUMAFORGE_ROOT, if it is set and unusable (the numaforge program asks before it loads the
    project's config from there)."""
    value = os.environ.get("NUMAFORGE_ROOT")
    if value is None:
        return None
    try:
        _text("NUMAFORGE_ROOT", value)
        project_dir("NUMAFORGE_ROOT", value)
    except EnvironmentValueError as exc:
        return exc
    return None
