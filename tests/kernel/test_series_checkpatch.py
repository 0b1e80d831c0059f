"""Every patch of the series (the shipped patches, the alternatives and the null control) passes the 5.10
tree's own scripts/checkpatch.pl --strict with no ERROR, WARNING or CHECK, and `backport --signoff` commits it as the
user's git identity with the user's Signed-off-by (git am --signoff) on the real 5.10.262 tree. The series' mainline
copy (mainline/, issue 42 item 7) passes the checkpatch.pl of Debian's newest kernel source (MAINLINE_DEBIAN, set up
by scripts/setup.d/35-kernel-caches.sh) and applies there with git am; each base's patches Cc exactly the SCHEDULER
maintainers and reviewers of that tree's MAINTAINERS.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from numaforge.defaults import MAINLINE_DEBIAN as MAINLINE_SPEC
from numaforge.kernel import backport as kb
from numaforge.kernel import source as ksource
from numaforge.kernel.series import load_series
from numaforge.paths import build_dir, cache_dir

pytestmark = pytest.mark.kernel_source

ROOT = Path(__file__).resolve().parents[2]
SERIES = ROOT / "patches" / kb.DEFAULT_SERIES
MAINLINE = SERIES / "mainline"
PATCHES = sorted(p for p in SERIES.rglob("*.patch") if MAINLINE not in p.parents)
MAINLINE_PATCHES = sorted(MAINLINE.glob("*.patch"))
SPEC = "debian:linux-source-5.10=5.10.262-1"


@pytest.fixture(scope="module")
def tree() -> Path:
    return ksource.prepare(SPEC).repo


@pytest.fixture(scope="module")
def mainline_tree() -> Path:
    return ksource.prepare(MAINLINE_SPEC).repo


def checkpatch(tree: Path, patch: Path) -> subprocess.CompletedProcess:
    """checkpatch --strict. UNKNOWN_COMMIT_ID is ignored: the trees are imported Debian tarballs, one commit
    without history, so checkpatch cannot look up a Fixes: commit in them (a real linux.git resolves it; the ids and
    subjects are cited from upstream mail in the series README, "Upstream form")."""
    return subprocess.run(
        [
            "perl",
            str(tree / "scripts" / "checkpatch.pl"),
            "--strict",
            "--no-tree",
            "--no-color",
            "--ignore",
            "UNKNOWN_COMMIT_ID",
            str(patch),
        ],
        cwd=tree,
        capture_output=True,
        text=True,
    )


def test_series_has_winner_alternative_and_null_control():
    names = {p.relative_to(SERIES).parts[0] for p in PATCHES}
    assert {"alternatives", "controls"} <= names and len(PATCHES) >= 4


@pytest.mark.parametrize("patch", PATCHES, ids=[str(p.relative_to(SERIES)) for p in PATCHES])
def test_checkpatch_clean(tree, patch):
    r = checkpatch(tree, patch)
    out = r.stdout + r.stderr
    assert "total: 0 errors, 0 warnings, 0 checks" in out, out
    assert r.returncode == 0, out


@pytest.mark.parametrize("patch", MAINLINE_PATCHES, ids=[p.name for p in MAINLINE_PATCHES])
def test_mainline_copy_checkpatch_clean_with_the_mainline_trees_checkpatch(mainline_tree, patch):
    r = checkpatch(mainline_tree, patch)
    out = r.stdout + r.stderr
    assert "total: 0 errors, 0 warnings, 0 checks" in out, out
    assert r.returncode == 0, out


def scheduler_entry(maintainers: str) -> set[str]:
    """'Name <email>' of every M: and R: line of the SCHEDULER entry (the role notes in parentheses dropped)."""
    block = maintainers.split("\nSCHEDULER\n", 1)[1].split("\n\n", 1)[0]
    return {re.sub(r"\s*\(.*\)$", "", ln[3:].strip()) for ln in block.splitlines() if ln[:2] in ("M:", "R:")}


@pytest.mark.parametrize("which", ["5.10", "mainline"])
def test_each_patch_ccs_the_scheduler_maintainers_and_reviewers_of_its_trees_maintainers(tree, mainline_tree, which):
    repo, patches = (tree, [SERIES / p for p in (SERIES / "series").read_text().split() if p.endswith(".patch")])
    if which == "mainline":
        repo, patches = mainline_tree, MAINLINE_PATCHES
    wanted = scheduler_entry(
        subprocess.run(
            ["git", "-C", str(repo), "show", "numaforge-base:MAINTAINERS"], capture_output=True, text=True, check=True
        ).stdout
    )
    assert len(wanted) >= 8 and "Peter Zijlstra <peterz@infradead.org>" in wanted
    for p in patches:
        msg = p.read_text().split("\n---\n", 1)[0]
        assert {ln[4:] for ln in msg.splitlines() if ln.startswith("Cc: ")} == wanted, p.name


def test_mainline_copy_applies_to_the_mainline_tree_with_git_am(mainline_tree):
    """backport (git am --3way) of mainline/ onto Debian's newest kernel source: one commit per patch, in order."""
    res = kb.backport(MAINLINE_SPEC, series=str(MAINLINE), compile_check=False)
    subjects = subprocess.run(
        ["git", "-C", str(res.tree), "log", "--reverse", "--format=%s", f"{res.base_commit}..{res.result_commit}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert subjects == [p.subject for p in load_series(MAINLINE).patches]
    assert res.base_version.startswith("6.")


def test_checkpatch_is_live_a_missing_signed_off_by_is_an_error(tree, tmp_path):
    """The check above can fail: the same patch without its Signed-off-by is an ERROR for checkpatch."""
    src = SERIES / "0001-sched-numa-skip-zero-gain-third-node-moves-outside-a-group.patch"
    bad = tmp_path / src.name
    bad.write_text(
        "".join(ln for ln in src.read_text().splitlines(keepends=True) if not ln.startswith("Signed-off-by:"))
    )
    r = checkpatch(tree, bad)
    assert r.returncode != 0 and "Missing Signed-off-by" in r.stdout


def test_backport_signoff_commits_as_the_user_and_adds_the_users_signed_off_by(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Ada Tester\n\temail = ada@example.org\n")
    # the shared cache and build dir stay where they are (they default to $HOME's): a new HOME must not mean
    # importing the kernel tarball again into a cache of its own
    monkeypatch.setenv("NUMAFORGE_CACHE", str(cache_dir()))
    monkeypatch.setenv("NUMAFORGE_BUILD", str(build_dir()))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for k in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(k, raising=False)
    ident = kb.user_identity(cwd=tmp_path)  # outside the checkout: only the (test) global config applies
    assert ident == {"GIT_COMMITTER_NAME": "Ada Tester", "GIT_COMMITTER_EMAIL": "ada@example.org"}
    monkeypatch.setattr(kb, "user_identity", lambda cwd=None: ident)
    try:
        res = kb.backport(SPEC, compile_check=False, signoff=True)
        log = subprocess.run(
            [
                "git",
                "-C",
                str(res.tree),
                "log",
                "--format=%cn <%ce>%n%B%n--end--",
                f"{res.base_commit}..{res.result_commit}",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        commits = [c for c in log.split("--end--") if c.strip()]
        assert len(commits) == len(load_series(SERIES).patches)  # 0000, 0001, 0002
        for c in commits:
            assert c.strip().startswith("Ada Tester <ada@example.org>")
            trailers = [ln for ln in c.splitlines() if ln.startswith("Signed-off-by:")]
            assert trailers[-1] == "Signed-off-by: Ada Tester <ada@example.org>", trailers
            assert len(trailers) == 2  # the maintainer's from the file, then the user's
        assert res.manifest["signoff"] == ident
    finally:
        kb.backport(SPEC, compile_check=False)  # leave the shared tree on the unsigned result, as CI expects


def test_signoff_without_an_identity_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    env_before = dict(os.environ)
    with pytest.raises(kb.BackportError) as ei:
        kb.user_identity(cwd=tmp_path)
    assert "user.name" in ei.value.what and "git config --global user.name" in ei.value.fix
    assert dict(os.environ) == env_before


@pytest.mark.parametrize("email", ["12345+ada@users.noreply.github.com", "no-reply@example.org", "x@NoReply.example"])
def test_signoff_as_a_no_reply_alias_is_refused(tmp_path, monkeypatch, email):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    (tmp_path / ".gitconfig").write_text(f"[user]\n\tname = Ada Tester\n\temail = {email}\n")
    with pytest.raises(kb.BackportError) as ei:
        kb.user_identity(cwd=tmp_path)
    assert "no-reply alias" in ei.value.what and ei.value.where == "git config user.email"
    assert "git config user.email you@example.org" in ei.value.fix
    (tmp_path / ".gitconfig").write_text("[user]\n\tname = Ada Tester\n\temail = ada.noreplyfan@example.org\n")
    assert kb.user_identity(cwd=tmp_path)["GIT_COMMITTER_EMAIL"] == "ada.noreplyfan@example.org"
