"""Re-vendor a capture from a git repository holding a whole Redfish-Mockup-Creator tree (maintainer tool, not a test).

    python tests/data/captures/vendor.py GIT_DIR COMMIT TREE_PATH NAME

reads TREE_PATH (e.g. tests/mockups/hpe) at COMMIT of the repository GIT_DIR (e.g. `fetch github:NVIDIA/libredfish`'s
mirror) and writes tests/data/captures/NAME/ with only what numaforge.bios.capture.crawl selects (what the BIOS flow
reads), documents as captured (not scrubbed: these are public). SOURCE.md and LICENSE are written by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from numaforge.bios.capture import crawl, write_tree


def main(git_dir: str, commit: str, tree_path: str, name: str) -> None:
    tree_path = tree_path.rstrip("/")
    files = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "--name-only", commit, tree_path + "/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    index = {}
    for f in files:
        if f.endswith("/index.json"):
            rel = f[len(tree_path) + 1 : -len("/index.json")]
            index[rel.lower()] = rel

    def get(uri: str):
        rel = index.get(uri.split("?", 1)[0].strip("/").lower())
        if rel is None:
            return None
        blob = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{commit}:{tree_path}/{rel}/index.json"],
            capture_output=True,
            text=True,
        )
        if blob.returncode != 0:  # listed but absent from the snapshot (a large file): not there
            print(f"absent: {rel}", file=sys.stderr)
            return None
        try:
            return rel, json.loads(blob.stdout)
        except ValueError:
            print(f"not JSON: {rel}", file=sys.stderr)
            return None

    docs = crawl(get)
    out = Path(__file__).resolve().parent / name
    write_tree(docs, out)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{name}: {len(docs)} documents, {size} bytes")


if __name__ == "__main__":
    main(*sys.argv[1:])
