"""Where numaforge finds its data and keeps its outputs: the one module that knows the layout.

Data (BIOS profiles and vendor maps in bios/, host OS profiles in hostos/, patch series in patches/, kpatch targets and lab kernel files in
kpatch/{targets,lab}, inventory templates in inventory/) is looked up in two places, first hit wins:

1. the **project directory**: ``--root DIR``, else ``$NUMAFORGE_ROOT``, else the current directory when it looks
   like a project (has bios/, patches/, kpatch/targets/, inventory/ or numaforge.yaml), else the checkout the
   package runs from (an editable install), else the current directory;
2. the **built-in data**: ``numaforge/_data`` in an installed wheel (copied from the checkout at wheel build,
   setup.py), or the checkout itself when running from one.

So a project's own ``bios/profiles/x.yaml.j2`` overrides the built-in one of the same name, and a project with
none gets the built-ins.

Outputs never go into the install tree or a checkout: state (lab VM/BMC state, the lab inventory, resume
journals) goes to ``$XDG_STATE_HOME/numaforge/<project>/`` and builds (backport trees, kpatch modules) to
``$XDG_DATA_HOME/numaforge/<project>/build/``, where <project> is the project directory's name plus a short hash
of its path (two clones never share outputs). ``$NUMAFORGE_STATE``, ``$NUMAFORGE_BUILD`` and
``$NUMAFORGE_KPATCH_BUILD`` override them; the content-addressed cache stays in ``$NUMAFORGE_CACHE``
(``~/.cache/numaforge``), shared by every project of the user.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .errors import NumaforgeError
from .textsafe import printable

PACKAGE_DIR = Path(__file__).resolve().parent
_PARENT = PACKAGE_DIR.parent
# the checkout this package runs from (editable install / `invoke` in a clone), None in an installed wheel
CHECKOUT: Path | None = _PARENT if (_PARENT / "pyproject.toml").is_file() and (_PARENT / "tasks.py").is_file() else None
# the built-in data: the wheel's numaforge/_data, else the checkout
BUILTIN: Path = PACKAGE_DIR / "_data" if (PACKAGE_DIR / "_data").is_dir() or CHECKOUT is None else CHECKOUT
# the data directories a wheel ships (setup.py copies them into numaforge/_data)
DATA_DIRS = ("bios", "hostos", "patches", "kpatch/targets", "kpatch/lab", "inventory")
PROJECT_MARKERS = ("numaforge.yaml", "bios", "hostos", "patches", "kpatch/targets", "inventory")
# kept for code that means "the source checkout" (tests, benchmarks); library code uses the functions below
ROOT = CHECKOUT or BUILTIN

_project: Path | None = None


class ProjectError(NumaforgeError):
    """The project directory given is not usable."""

    exit_code = 2
    refusal = True


def set_project_dir(path: str | os.PathLike | None) -> Path | None:
    """Use ``path`` as the project directory for the rest of the process (``--root``); None resets."""
    global _project
    if path is None:
        _project = None
        return None
    fix = "pass a directory holding your bios/, inventory/, patches/ or kpatch/targets/"
    shown = printable(str(path))
    p, problem = directory_check(path)
    if problem == "file":
        raise ProjectError(f"project directory {shown} is not a directory (it is a file)", "--root", fix)
    if problem == "missing":
        raise ProjectError(f"project directory {shown} does not exist", "--root", fix)
    if problem:
        raise ProjectError(f"project directory {shown} cannot be used: {problem}", "--root", fix)
    _project = p
    return p


def directory_check(path: str | os.PathLike) -> tuple[Path, str]:
    """(``path`` resolved, "" when it is a directory, else "file", "missing" or why it cannot be resolved: a link
    loop, a NUL, a name too long). The one check of a project directory, for --root and $NUMAFORGE_ROOT."""
    try:
        p = Path(path).expanduser().resolve()
        return p, "" if p.is_dir() else "file" if p.exists() else "missing"
    except (OSError, RuntimeError, ValueError) as exc:
        return Path(path), str(exc) or type(exc).__name__


def project_dir_given() -> bool:
    """--root (or the config's numaforge.root) chose the project directory: $NUMAFORGE_ROOT is not used."""
    return _project is not None


def looks_like_project(d: Path) -> bool:
    return any((d / m).exists() for m in PROJECT_MARKERS)


def project_dir() -> Path:
    """The user's project directory (module docstring)."""
    if _project is not None:
        return _project
    env = os.environ.get("NUMAFORGE_ROOT")
    if env:
        return Path(env).expanduser().resolve()
    cwd = Path.cwd()
    if looks_like_project(cwd):
        return cwd
    return CHECKOUT or cwd


def data_dirs(*parts: str) -> list[Path]:
    """Existing directories for ``parts`` (e.g. "bios", "profiles"), the project's first, then the built-in."""
    out: list[Path] = []
    for base in (project_dir(), BUILTIN):
        d = base.joinpath(*parts)
        if d.is_dir() and d not in out:
            out.append(d)
    return out


def data_dir(*parts: str) -> Path:
    """The first existing data directory for ``parts``; the built-in path (maybe absent) if none exists."""
    dirs = data_dirs(*parts)
    return dirs[0] if dirs else BUILTIN.joinpath(*parts)


def find_data(*parts: str) -> Path | None:
    """The file or directory ``parts`` from the project, else the built-in data; None if neither has it."""
    for base in (project_dir(), BUILTIN):
        p = base.joinpath(*parts)
        if p.exists():
            return p
    return None


def data_names(*parts: str, suffix: str = "", dirs: bool = False) -> list[str]:
    """Names available under ``parts`` in the project and the built-in data (``suffix`` stripped), sorted."""
    names: set[str] = set()
    for d in data_dirs(*parts):
        for p in d.iterdir():
            if dirs and p.is_dir():
                names.add(p.name)
            elif not dirs and p.is_file() and p.name.endswith(suffix):
                names.add(p.name[: len(p.name) - len(suffix)] if suffix else p.name)
    return sorted(names)


def editable(path: str | os.PathLike) -> str:
    """Where the user edits data file ``path``, for a fix text: the file itself when it is the project's (or a
    checkout's); for a built-in file of an installed wheel, the same name in the project directory, where a copy
    overrides the built-in one -- never a path into site-packages."""
    p = Path(path)
    if CHECKOUT is not None and BUILTIN == CHECKOUT:
        return str(p)
    try:
        rel = p.resolve().relative_to(BUILTIN.resolve())
    except ValueError:
        return str(p)
    return f"{project_dir() / rel} (a copy of the built-in {rel}, which then overrides it; docs/operating.md)"


def project_key() -> str:
    """<name>-<hash of the path> of the project directory: a per-project folder name for outputs."""
    p = project_dir()
    return f"{p.name or 'root'}-{hashlib.sha256(str(p).encode()).hexdigest()[:8]}"


def _xdg(var: str, default: str) -> Path:
    v = os.environ.get(var)
    return Path(v).expanduser() if v and os.path.isabs(os.path.expanduser(v)) else Path(default).expanduser()


def _made(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def state_dir() -> Path:
    """Per-user, per-project state: lab/ (VM, BMC, lab inventory), journal/ ($NUMAFORGE_STATE overrides)."""
    env = os.environ.get("NUMAFORGE_STATE")
    return _made(
        Path(env).expanduser() if env else _xdg("XDG_STATE_HOME", "~/.local/state") / "numaforge" / project_key()
    )


def lab_state_dir() -> Path:
    return state_dir() / "lab"


def cache_dir() -> Path:
    """Content-addressed cache shared by runs and by CI on the same machine ($NUMAFORGE_CACHE)."""
    return _made(Path(os.environ.get("NUMAFORGE_CACHE", "~/.cache/numaforge")).expanduser())


def build_dir() -> Path:
    """Per-project outputs: build/<pipeline>/... ($NUMAFORGE_BUILD overrides)."""
    env = os.environ.get("NUMAFORGE_BUILD")
    return _made(
        Path(env).expanduser()
        if env
        else _xdg("XDG_DATA_HOME", "~/.local/share") / "numaforge" / project_key() / "build"
    )


def kpatch_build_dir() -> Path:
    """Built live-patch modules, one directory per target ($NUMAFORGE_KPATCH_BUILD overrides)."""
    env = os.environ.get("NUMAFORGE_KPATCH_BUILD")
    return _made(Path(env).expanduser() if env else build_dir() / "kpatch")


def atomic_write_text(path: Path, text: str) -> None:
    """Write a file so readers see the old or the new content, never a part (temp file + rename; the temp
    file is removed if anything fails)."""
    import tempfile

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
