"""The lab tests' helpers. The session lab VM (`lab`) is tests/conftest.py's, so the lab_vm tests of every
directory share one boot (tests/labvm.py)."""

from __future__ import annotations

from pathlib import Path

from labvm import LP_DATA  # noqa: F401  (for the tests: from .conftest import LP_DATA)


def manifest_for(ko: Path, dest_dir: Path, **fields) -> Path:
    """Copy a test module next to a manifest.json declaring its mode (what build-kpatch writes for its modules)."""
    import hashlib
    import json
    import shutil

    dest_dir.mkdir(parents=True, exist_ok=True)
    out = dest_dir / ko.name
    shutil.copy2(ko, out)
    (dest_dir / "manifest.json").write_text(
        json.dumps({"sha256": hashlib.sha256(out.read_bytes()).hexdigest(), "module_file": out.name, **fields})
    )
    return out
