"""Shared helpers for the backport tests: synthetic 5.10-shaped git repos built from tests/data/backport."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "backport"
IDENT = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@numaforge.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@numaforge.invalid",
    "GIT_AUTHOR_DATE": "2026-12-01T09:00:00+0000",
    "GIT_COMMITTER_DATE": "2026-12-01T09:00:00+0000",
}


def git(repo: Path, *args: str) -> str:
    import os

    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env={**os.environ, **IDENT}
    ).stdout.strip()


def mini_repo(dest: Path, *versions: str, tag: bool = True) -> Path:
    """A git work tree whose history is the mini trees in order (e.g. '5.10.223' then '5.10.262')."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    for v in versions:
        for item in dest.iterdir():
            if item.name != ".git":
                shutil.rmtree(item) if item.is_dir() else item.unlink()
        shutil.copytree(DATA / f"mini-tree-{v}", dest, dirs_exist_ok=True, copy_function=shutil.copy)
        git(dest, "add", "-A")
        git(dest, "commit", "-q", "-m", f"mini tree {v}")
        if tag:
            git(dest, "tag", f"v{v}")
    return dest


def mini_tarball(dest_dir: Path, version: str) -> Path:
    tb = dest_dir / f"linux-mini-{version}.tar.xz"
    with tarfile.open(tb, "w:xz") as tf:
        tf.add(DATA / f"mini-tree-{version}", arcname=f"linux-mini-{version}")
    return tb


def worktree_digest(repo: Path) -> str:
    """sha256 over every work-tree file (path + bytes), .git excluded: byte-identical check."""
    h = hashlib.sha256()
    for p in sorted(repo.rglob("*")):
        if ".git" in p.relative_to(repo).parts or not p.is_file():
            continue
        h.update(str(p.relative_to(repo)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def snapshot(repo: Path) -> dict:
    return {
        "head": git(repo, "rev-parse", "HEAD"),
        "symref": subprocess.run(
            ["git", "-C", str(repo), "symbolic-ref", "-q", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "branches": git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads"),
        "status": git(repo, "status", "--porcelain=v1", "--untracked-files=all", "--ignored"),
        "files": worktree_digest(repo),
    }
