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
