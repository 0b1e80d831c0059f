"""Backport machinery against real git on small synthetic 5.10-shaped trees (tests/data/backport/mini-tree-*).

The real linux-source-5.10 trees are exercised in test_backport_real.py (kernel_source tier); these cover
every source kind, conflicts and restore, idempotency and the CLI quickly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from numaforge.kernel import backport as kb
from numaforge.kernel.series import CorruptPatchError, MissingPatchError
from numaforge.kernel.source import SourceError
from numaforge.report import load_schema

from .backport_helpers import DATA, git, mini_repo, mini_tarball, snapshot

ROOT = Path(__file__).resolve().parents[2]
CLEAN = str(DATA / "applies-cleanly")
CONFLICT = str(DATA / "conflicting-hunk")


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMAFORGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("NUMAFORGE_BUILD", str(tmp_path / "build"))


def run(spec, series=CLEAN):
    return kb.backport(str(spec), str(series), compile_check=False)


def test_local_git_applies_on_named_branch_and_writes_outputs(tmp_path):
    repo = mini_repo(tmp_path / "linux", "5.10.262")
    base = git(repo, "rev-parse", "HEAD")
    res = run(repo)
    assert res.status == "applied" and res.tree == repo and res.base_version == "5.10.262"
    assert res.source_hash == f"git:{base}" and res.base_commit == base
    assert git(repo, "symbolic-ref", "HEAD") == "refs/heads/backport/applies-cleanly/5.10.262"
    assert git(repo, "rev-parse", "HEAD") == res.result_commit
    assert git(repo, "rev-parse", f"{res.result_commit}~2") == base
    assert git(repo, "log", "--format=%s", "-2").splitlines() == [
        "sched/numa: add a numa_prefer_local sysctl",
        "sched/numa: pick the local node when nothing is better",
    ]
    # combined.patch is for kpatch-build: only the kpatch: true patch (0002 adds a sysctl)
    combined = res.combined_patch.read_text()
    assert "kernel/sched/fair.c" in combined and "sysctl" not in combined
    assert res.combined_patch == tmp_path / "build/backport/applies-cleanly/5.10.262/combined.patch"
    subprocess.run(
        ["git", "-C", str(repo), "apply", "--check", "-R", "--exclude=kernel/sysctl.c", str(res.combined_patch)],
        check=True,
    )
    manifest = json.loads((res.combined_patch.parent / "manifest.json").read_text())
    assert manifest == res.manifest
    assert manifest["result_commit"] == res.result_commit and manifest["tree"] == str(repo)
    assert [p["kpatch"] for p in manifest["patches"]] == [True, False]
    assert set(manifest["series_files"]) == {
        "series",
        "metadata.yaml",
        "0001-pick-local-node.patch",
        "0002-add-sysctl.patch",
    }
    assert kb.latest("applies-cleanly").result_commit == res.result_commit
    assert kb.latest("applies-cleanly", "5.10.223") is None


def test_rerun_is_idempotent_and_result_commit_deterministic(tmp_path):
    repo = mini_repo(tmp_path / "linux", "5.10.262")
    first = run(repo)
    before = snapshot(repo)
    second = run(repo)
    assert second.status == "unchanged" and second.result_commit == first.result_commit
    assert snapshot(repo) == before
    assert second.base_commit == first.base_commit and second.source_hash == first.source_hash
    # forget the recorded state: git am runs again and lands on the very same commit
    git(repo, "checkout", "-q", "main")
    state = Path(git(repo, "rev-parse", "--absolute-git-dir")) / "numaforge"
    for f in state.iterdir():
        f.unlink()
    third = run(repo)
    assert third.status == "applied" and third.result_commit == first.result_commit


@pytest.mark.parametrize("identity", [True, False], ids=["git-identity", "no-git-identity"])
def test_conflict_3way_reports_hunk_and_restores_tree_byte_identical(tmp_path, monkeypatch, identity):
    """History 5.10.223 -> 5.10.262 holds the patch's pre-image blob, so git am falls back to a 3-way merge.
    Without a git identity (a fresh build server's account: no ~/.gitconfig), the restore still aborts the am."""
    repo = mini_repo(tmp_path / "linux", "5.10.223", "5.10.262")
    if not identity:
        monkeypatch.setenv("HOME", str(tmp_path / "no-identity-home"))
        monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        for k in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
            monkeypatch.delenv(k, raising=False)
    (repo / "local-notes.txt").write_text("untracked file must survive\n")
    before = snapshot(repo)
    with pytest.raises(kb.ConflictError) as ei:
        run(repo, CONFLICT)
    err = ei.value
    assert snapshot(repo) == before
    assert "backport/conflicting-hunk" not in git(repo, "branch", "--list")
    assert not (Path(git(repo, "rev-parse", "--absolute-git-dir")) / "rebase-apply").exists()
    d = err.detail
    assert d["patch"] == "0001-local-fallback-and-weight.patch"
    assert d["files"] == ["kernel/sched/fair.c"]
    [h] = d["hunks"]
    assert (h["file"], h["hunk"], h["line"]) == ("kernel/sched/fair.c", 2, 33)
    assert "\treturn 100 * faults / total;" in h["expected"] and "\treturn 1000 * faults / total;" in h["found"]
    assert d["markers"]["kernel/sched/fair.c"], "3-way merge should have left conflict markers"
    assert err.where == "kernel/sched/fair.c:33 (hunk 2 of 0001-local-fallback-and-weight.patch)"
    assert "variant" in err.fix and err.exit_code == 4


def test_conflict_restores_a_preexisting_result_branch(tmp_path):
    repo = mini_repo(tmp_path / "linux", "5.10.262")
    git(repo, "branch", "backport/conflicting-hunk/5.10.262", "HEAD")
    git(repo, "commit", "-q", "--allow-empty", "-m", "work on main")
    before = snapshot(repo)
    with pytest.raises(kb.ConflictError):
        run(repo, CONFLICT)
    assert snapshot(repo) == before


def test_conflict_on_detached_head_is_restored(tmp_path):
    repo = mini_repo(tmp_path / "linux", "5.10.262")
    git(repo, "checkout", "-q", "--detach", "HEAD")
    before = snapshot(repo)
    with pytest.raises(kb.ConflictError):
        run(repo, CONFLICT)
    assert snapshot(repo) == before


def test_tarball_imported_once_then_reused(tmp_path):
    tb = mini_tarball(tmp_path, "5.10.262")
    first = run(tb)
    assert first.manifest["source_imported"] is True and first.source_hash.startswith("sha256:")
    trees = tmp_path / "cache/kernel/trees"
    assert [p.name for p in trees.iterdir() if not p.name.startswith(".")] == [first.source_hash.split(":")[1]]
    marker = first.tree / ".git" / "numaforge-import.json"
    mtime = marker.stat().st_mtime_ns
    second = run(tb)
    assert second.manifest["source_imported"] is False and second.status == "unchanged"
    assert marker.stat().st_mtime_ns == mtime and second.base_commit == first.base_commit
    assert (
        git(first.tree, "show", "-s", "--format=%an %ad", "--date=iso", second.base_commit)
        == "numaforge import 2000-01-01 00:00:00 +0000"
    )


def test_conflict_on_tarball_tree_without_3way_base(tmp_path):
    tb = mini_tarball(tmp_path, "5.10.262")
    ok = run(tb)  # import + apply a good series first: the tree is on that branch
    before = snapshot(ok.tree)
    with pytest.raises(kb.ConflictError) as ei:
        run(tb, CONFLICT)
    assert snapshot(ok.tree) == before
    assert [(h["hunk"], h["line"]) for h in ei.value.detail["hunks"]] == [(2, 33)]
    assert "lacks necessary blobs to fall back on 3-way merge" in ei.value.detail["git"]


def test_git_url_file_scheme(tmp_path):
    work = mini_repo(tmp_path / "work", "5.10.223", "5.10.262")
    bare = tmp_path / "linux.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    res = run(f"file://{bare}@v5.10.223")
    assert res.base_version == "5.10.223" and res.base_commit == git(work, "rev-parse", "v5.10.223")
    assert res.tree.is_relative_to(tmp_path / "cache/kernel/clones")
    res262 = run(f"file://{bare}@v5.10.262")
    assert res262.tree == res.tree and res262.base_version == "5.10.262"
    with pytest.raises(SourceError, match="ref 'v9.9' not found"):
        run(f"file://{bare}@v9.9")
    with pytest.raises(SourceError, match="git could not clone"):
        run(f"file://{tmp_path}/nope.git@v5.10.262")


def test_per_base_variant_is_used_only_for_its_base(tmp_path):
    series = DATA / "needs-variant-on-223"
    r223 = run(mini_tarball(tmp_path, "5.10.223"), series)
    r262 = run(mini_tarball(tmp_path, "5.10.262"), series)
    assert r223.manifest["patches"][0]["variant"] is True
    assert r223.manifest["patches"][0]["applied_file"] == "variants/5.10.223/0001-smooth-numa-weight.patch"
    assert r262.manifest["patches"][0]["variant"] is False
    assert "100 * faults / (total + 1)" in git(r223.tree, "show", "HEAD:kernel/sched/fair.c")
    assert "1000 * faults / (total + 1)" in git(r262.tree, "show", "HEAD:kernel/sched/fair.c")


def test_dirty_tree_is_refused_untouched(tmp_path):
    repo = mini_repo(tmp_path / "linux", "5.10.262")
    (repo / "Makefile").write_text((repo / "Makefile").read_text() + "# local edit\n")
    before = snapshot(repo)
    with pytest.raises(kb.BackportError, match="uncommitted changes \\(Makefile\\)"):
        run(repo)
    assert snapshot(repo) == before


def test_corrupt_and_missing_patches_fail_before_touching_the_tree(tmp_path):
    repo = mini_repo(tmp_path / "linux", "5.10.262")
    before = snapshot(repo)
    with pytest.raises(CorruptPatchError, match=r"0001-pick-local-node.patch:22"):
        run(repo, DATA / "corrupt-hunk-line-count")
    with pytest.raises(MissingPatchError, match=r"missing-patch-file/series:2"):
        run(repo, DATA / "missing-patch-file")
    assert snapshot(repo) == before


def test_failed_compile_check_leaves_no_stale_manifest(tmp_path):
    """latest() must not hand build-kpatch an older result after the tree moved to an unchecked one."""
    import shutil

    from numaforge.errors import ToolMissingError

    series = tmp_path / "series-copy"
    shutil.copytree(DATA / "applies-cleanly", series)
    repo = mini_repo(tmp_path / "linux", "5.10.262")
    first = run(repo, series)
    assert kb.latest("applies-cleanly").result_commit == first.result_commit
    (series / "series").write_text("0001-pick-local-node.patch\n")
    (series / "metadata.yaml").write_text(
        "name: applies-cleanly\ntargets: ['5.10']\npatches: {0001-pick-local-node.patch: {kpatch: true}}\n"
    )
    with pytest.raises(ToolMissingError, match="compiler gcc-nonexistent-99 not found"):
        kb.backport(str(repo), str(series), compilers=("gcc-nonexistent-99",))
    assert kb.latest("applies-cleanly") is None


def test_kpatch_patch_that_needs_a_non_kpatch_patch_is_refused(tmp_path):
    repo = mini_repo(tmp_path / "linux", "5.10.262")
    with pytest.raises(kb.SeriesError, match="do not apply to the base without the kpatch: false ones") as ei:
        run(repo, DATA / "kpatch-patch-depends-on-non-kpatch")
    assert ei.value.where.endswith("kpatch-patch-depends-on-non-kpatch/metadata.yaml")
    assert not (tmp_path / "build/backport/kpatch-patch-depends-on-non-kpatch/5.10.262/combined.patch").exists()


def test_not_a_kernel_tree(tmp_path):
    repo = tmp_path / "other"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README").write_text("x\n")
    git(repo, "add", "README")
    git(repo, "commit", "-q", "-m", "x")
    with pytest.raises(SourceError, match="no top-level Makefile"):
        run(repo)


# ---- the invoke task: exit codes, messages, --json report


def invoke(tmp_path, *args):
    env = {**os.environ, "NUMAFORGE_CACHE": str(tmp_path / "cache"), "NUMAFORGE_BUILD": str(tmp_path / "build")}
    return subprocess.run(
        [sys.executable, "-m", "invoke", "backport", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_cli_success_writes_schema_valid_report_with_manifest(tmp_path):
    repo = mini_repo(tmp_path / "linux", "5.10.262")
    out = tmp_path / "report.json"
    p = invoke(
        tmp_path,
        "--source",
        str(repo),
        "--series",
        CLEAN,
        "--no-compile-check",
        "--json",
        str(out),
        "--compiler",
        "gcc-12",
        "--compiler",
        "gcc-10",
    )
    assert p.returncode == 0, p.stderr
    assert "backport applies-cleanly onto 5.10.262: applied" in p.stdout
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, load_schema())
    assert doc["ok"] is True and doc["data"]["manifest"]["result_commit"] == git(repo, "rev-parse", "HEAD")
    assert doc["options"]["compiler"] == ["gcc-12", "gcc-10"] and doc["options"]["no_compile_check"] is True
    p2 = invoke(tmp_path, "--source", str(repo), "--series", CLEAN, "--no-compile-check")
    assert p2.returncode == 0 and "unchanged" in p2.stdout


def test_cli_conflict_exits_nonzero_with_precise_message(tmp_path):
    repo = mini_repo(tmp_path / "linux", "5.10.262")
    before = snapshot(repo)
    out = tmp_path / "report.json"
    p = invoke(tmp_path, "--source", str(repo), "--series", CONFLICT, "--no-compile-check", "--json", str(out))
    assert p.returncode == 4
    assert "Traceback" not in p.stderr + p.stdout
    assert "kernel/sched/fair.c:33 (hunk 2 of 0001-local-fallback-and-weight.patch)" in p.stderr
    assert "patch expects:" in p.stderr and "return 100 * faults / total;" in p.stderr
    assert "tree has     :" in p.stderr and "return 1000 * faults / total;" in p.stderr
    doc = json.loads(out.read_text())
    assert doc["ok"] is False and doc["error"]["kind"] == "ConflictError"
    assert doc["data"]["conflict"]["hunks"][0]["line"] == 33
    assert snapshot(repo) == before


def test_cli_bad_source_and_missing_patch(tmp_path):
    p = invoke(tmp_path, "--source", str(tmp_path / "nope.tar.xz"), "--no-compile-check")
    assert p.returncode == 2 and "tarball not found" in p.stderr and "Traceback" not in p.stderr
    repo = mini_repo(tmp_path / "linux", "5.10.262")
    p = invoke(tmp_path, "--source", str(repo), "--series", str(DATA / "missing-patch-file"), "--no-compile-check")
    assert p.returncode == 2 and "0002-add-sysctl.patch does not exist" in p.stderr


def test_export_tree_writes_a_commits_files_without_git(tmp_path):
    """numaforge.kernel.source.export_tree: how build-kpatch and the lab kernel get a plain tree of the base."""
    from numaforge.kernel.source import export_tree

    repo = mini_repo(tmp_path / "repo", "5.10.223", "5.10.262")
    out = tmp_path / "out"
    out.mkdir()
    assert export_tree(repo, "v5.10.223", out)
    assert (out / "kernel/sched/fair.c").read_bytes() == (DATA / "mini-tree-5.10.223/kernel/sched/fair.c").read_bytes()
    assert not (out / ".git").exists()
    assert not export_tree(repo, "no-such-commit", tmp_path)
