"""The done-state of issue 3 on the real Debian linux-source-5.10 trees (5.10.262-1 and bullseye main's
5.10.223-1): download (cached), import, git am --3way, compile check with gcc-12 and gcc-10, outputs for
kpatch-build, idempotent re-run. Uses the shared cache (cache_dir()) and build dir, as CI does.
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
from numaforge.paths import cache_dir
from numaforge.report import load_schema

pytestmark = pytest.mark.kernel_source

ROOT = Path(__file__).resolve().parents[2]
BASES = [("5.10.262-1", "5.10.262"), ("5.10.223-1", "5.10.223")]


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module", params=BASES, ids=[b[1] for b in BASES])
def done(request):
    deb_version, base = request.param
    return deb_version, base, kb.backport(f"debian:linux-source-5.10={deb_version}")


def test_series_applied_on_real_tree(done):
    _, base, res = done
    assert res.base_version == base
    assert res.tree.parent == cache_dir() / "kernel" / "trees"
    assert res.source_hash == "sha256:" + res.tree.name
    assert (
        git(res.tree, "symbolic-ref", "HEAD").strip() == f"refs/heads/backport/sched-numa-prefer-local-fallback/{base}"
    )
    assert git(res.tree, "rev-parse", "HEAD").strip() == res.result_commit
    # 0000 (distance fix), 0001 (the rule), 0002 (the sched_feat): one commit each
    assert git(res.tree, "rev-parse", f"{res.result_commit}~3").strip() == res.base_commit
    assert git(res.tree, "diff", "--name-only", res.base_commit, f"{res.result_commit}~1").split() == [
        "kernel/sched/fair.c"
    ]
    assert git(res.tree, "diff", "--name-only", f"{res.result_commit}~1", res.result_commit).split() == [
        "kernel/sched/fair.c",
        "kernel/sched/features.h",
    ]
    fair = (res.tree / "kernel/sched/fair.c").read_text()
    assert "need_gain = sched_feat(NUMA_PREFER_LOCAL) &&\n\t\t\t    !ng && nr_online_nodes > 2 &&" in fair
    assert (
        "env.dst_stats.node_type == node_has_spare &&" in fair
        and "node_distance(nid, p->numa_preferred_nid)" not in fair
    )
    # 0000: the third-node loop weighs each node with its own distance
    assert "\t\t\tdist = node_distance(env.src_nid, nid);\n" in fair
    assert "\t\t\tdist = node_distance(env.src_nid, env.dst_nid);\n" not in fair  # the loop's; not the one before it
    assert "SCHED_FEAT(NUMA_PREFER_LOCAL, true)" in (res.tree / "kernel/sched/features.h").read_text()
    assert git(res.tree, "status", "--porcelain", "--untracked-files=no") == ""


def tmp_index(res) -> Path:
    """A throw-away index holding the base commit: `git apply --cached --check` tests the patch against base."""
    idx = Path(git(res.tree, "rev-parse", "--absolute-git-dir").strip()) / "numaforge" / "test-base.index"
    subprocess.run(
        ["git", "-C", str(res.tree), "read-tree", res.base_commit],
        check=True,
        env={**os.environ, "GIT_INDEX_FILE": str(idx)},
    )
    return idx


def test_combined_patch_and_manifest_for_kpatch(done):
    deb_version, base, res = done
    # kpatch-build gets 0000 + 0001 only (0002 adds a sched_feat: kpatch: false), as a diff against the base commit
    # (0000's diff, then 0001's, in series order: what backport.combined_diff concatenates)
    combined = res.combined_patch.read_text()
    assert combined == "".join(
        git(res.tree, "show", "--no-color", "--no-ext-diff", "--full-index", "--format=", c)
        for c in (f"{res.result_commit}~2", f"{res.result_commit}~1")
    )
    assert "sched_feat" not in combined and "SCHED_FEAT" not in combined
    check = subprocess.run(
        ["git", "-C", str(res.tree), "apply", "--check", "--cached", str(res.combined_patch)],
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_INDEX_FILE": str(tmp_index(res))},
    )
    assert check.returncode == 0, check.stderr
    m = json.loads((res.combined_patch.parent / "manifest.json").read_text())
    assert m["base_version"] == base and m["source_spec"] == f"debian:linux-source-5.10={deb_version}"
    assert m["result_commit"] == res.result_commit and m["tree"] == str(res.tree)
    assert [(p["kpatch"], p["variant"]) for p in m["patches"]] == [(True, False), (True, False), (False, False)]
    assert kb.latest("sched-numa-prefer-local-fallback", base).result_commit == res.result_commit


def test_compile_check_gcc12_and_gcc10_clean(done):
    _, base, res = done
    by_cc = {c["compiler"]: c for c in res.compile}
    assert set(by_cc) == {"gcc-12", "gcc-10"}
    assert by_cc["gcc-12"]["version"].startswith("12.") and by_cc["gcc-10"]["version"].startswith("10.")
    for c in by_cc.values():
        assert c["ok"] and c["objects"] == ["kernel/sched/fair.o"]
        for obj in c["objects"]:
            assert (Path(c["objdir"]) / obj).stat().st_size > 0
        config = (Path(c["objdir"]) / ".config").read_text()
        for opt in ("CONFIG_NUMA_BALANCING=y", "CONFIG_LIVEPATCH=y", "CONFIG_NUMA=y", "CONFIG_SCHED_DEBUG=y"):
            assert opt in config
        assert c["warnings"] == [], c["warnings"]
    assert len({c["objdir"] for c in res.compile}) == 2


def test_rerun_is_idempotent_and_does_not_reimport(done):
    deb_version, _, res = done
    head_before = git(res.tree, "rev-parse", "HEAD")
    again = kb.backport(f"debian:linux-source-5.10={deb_version}")
    assert again.status == "unchanged" and again.result_commit == res.result_commit
    assert again.manifest["source_imported"] is False
    assert all(c["cached"] for c in again.compile)
    assert git(res.tree, "rev-parse", "HEAD") == head_before


def test_invoke_task_json_report_carries_manifest(done, tmp_path):
    deb_version, base, res = done
    out = tmp_path / "r.json"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "backport",
            "--source",
            f"debian:linux-source-5.10={deb_version}",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, load_schema())
    assert doc["data"]["manifest"]["result_commit"] == res.result_commit
    assert doc["data"]["manifest"]["base_version"] == base
