"""Where numaforge keeps things: the project root, the content-hash cache, the build output dir."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cache_dir() -> Path:
    """Content-addressed cache shared by runs and by CI on the same machine ($NUMAFORGE_CACHE)."""
    p = Path(os.environ.get("NUMAFORGE_CACHE", "~/.cache/numaforge")).expanduser()
    p.mkdir(parents=True, exist_ok=True)
    return p


def build_dir() -> Path:
    """Per-checkout outputs (ignored by git): build/<pipeline>/..."""
    p = Path(os.environ.get("NUMAFORGE_BUILD", ROOT / "build"))
    p.mkdir(parents=True, exist_ok=True)
    return p


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
