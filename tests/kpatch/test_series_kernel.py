"""The series kernel (protocol amendment 7's full kernel: the lab kernel with the whole series built in) is an
incremental build of the cached lab kernel (issue 43): a copy of the lab kernel's built tree with the series
applied and `make` run again, so it differs from the lab kernel only by the series, carries the series'
NUMA_PREFER_LOCAL scheduler feature, and leaves the cached lab kernel as it was.

Kpatch tier: it reads the cached lab kernel (setup builds it) and the series kernel (setup builds it from the lab
kernel in about a minute; built here if missing)."""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
from pathlib import Path

import pytest

from numaforge.digest import sha256_file
from numaforge.kernel import labkernel
from numaforge.kernel.kpatch_inputs import source_like
from numaforge.measure import arms as marms
from numaforge.paths import cache_dir

pytestmark = pytest.mark.kpatch


@pytest.fixture(scope="module")
def kernels(bp):
    """(lab kernel, series kernel, the backport's base and result commits)."""
    series = marms.full_kernel(log=lambda m: print(m, flush=True))
    lab = labkernel.lab_kernel(log=lambda m: print(m, flush=True), source=source_like(bp))
    return lab, series, bp


def git(bp, *args: str) -> str:
    return subprocess.run(["git", "-C", str(bp.tree), *args], capture_output=True, text=True, check=True).stdout


def differing(a: Path, b: Path, rels) -> list[str]:
    """Which of the relative paths differ in content between trees a and b (a missing file differs)."""
    out = []
    for rel in rels:
        pa, pb = a / rel, b / rel
        if pa.is_symlink() or pb.is_symlink():  # scripts/dtc/include-prefixes/*: links to directories
            same = pa.is_symlink() and pb.is_symlink() and os.readlink(pa) == os.readlink(pb)
        else:
            same = pa.exists() == pb.exists() and (not pa.exists() or filecmp.cmp(pa, pb, shallow=True))
        if not same:
            out.append(rel)
    return sorted(out)


def test_the_series_kernel_is_built_from_the_lab_kernel_and_cached_under_its_key(kernels):
    lab, series, bp = kernels
    st = json.loads((series.root / labkernel.STATE).read_text())
    assert st["incremental"] is True and st["built_from"] == lab.key
    tree_id = git(bp, "rev-parse", f"{bp.result_commit}^{{tree}}").strip()
    assert series.key == labkernel.series_key(lab.key, tree_id)
    assert series.root == cache_dir() / "kpatch" / "series" / series.key
    assert series.source_hash == f"{lab.source_hash}+series-tree:{tree_id}"
    assert series.release == lab.release
    assert series.config.read_bytes() == lab.config.read_bytes()  # same configuration, same flags
    assert labkernel.series_kernel(bp.tree, bp.base_commit, bp.result_commit, bp.source_hash).built_now is False


def test_its_sources_differ_from_the_lab_kernels_only_by_the_series(kernels):
    lab, series, bp = kernels
    files = labkernel.series_files(bp.tree, bp.base_commit, bp.result_commit)
    assert "kernel/sched/fair.c" in files and "kernel/sched/features.h" in files
    assert files == sorted(git(bp, "diff", "--name-only", bp.base_commit, bp.result_commit).split())
    tracked = set(git(bp, "ls-tree", "-r", "--name-only", bp.result_commit).split())
    tracked |= set(git(bp, "ls-tree", "-r", "--name-only", bp.base_commit).split())
    assert differing(lab.tree, series.tree, sorted(tracked)) == files
    for rel in files:  # each is the result commit's file
        assert (series.tree / rel).read_bytes() == subprocess.run(
            ["git", "-C", str(bp.tree), "show", f"{bp.result_commit}:{rel}"], capture_output=True, check=True
        ).stdout


def test_only_objects_the_series_reaches_were_compiled_again(kernels):
    lab, series, bp = kernels
    files = labkernel.series_files(bp.tree, bp.base_commit, bp.result_commit)
    objs = sorted(str(p.relative_to(series.tree)) for p in series.tree.rglob("*.o"))
    changed = differing(lab.tree, series.tree, objs)
    # what kbuild records each object depends on (its .<name>.o.cmd): the units that include a series file
    # (features.h reaches every kernel/sched unit and kernel/livepatch/transition.c through sched.h)
    reached = []
    for o in objs:
        cmd = series.tree / Path(o).parent / f".{Path(o).name}.cmd"
        if cmd.is_file() and set(files) & {os.path.normpath(t) for t in cmd.read_text(errors="replace").split()}:
            reached.append(o)
    assert "kernel/sched/fair.o" in reached and "kernel/sched/fair.o" in changed
    # besides them only the links: vmlinux.o and kallsyms' at the top, the bzImage wrapper around vmlinux
    stray = [o for o in changed if o not in reached and "/" in o and not o.startswith("arch/x86/boot/")]
    assert stray == [], stray
    assert len(changed) < len(objs) / 20  # an incremental build, not a second full one


def test_it_carries_the_series_scheduler_feature_and_the_lab_kernel_does_not(kernels):
    lab, series, _ = kernels
    name = marms.FEATURE.encode()
    assert name in series.vmlinux.read_bytes()  # sched_feat_names[] of kernel/sched/debug.c
    assert name not in lab.vmlinux.read_bytes()
    assert series.bzimage.is_file() and series.bzimage.read_bytes() != lab.bzimage.read_bytes()


def test_the_cached_lab_kernel_is_left_as_it_was(kernels):
    lab, series, bp = kernels
    for rel in labkernel.series_files(bp.tree, bp.base_commit, bp.result_commit):
        assert (lab.tree / rel).read_bytes() == subprocess.run(
            ["git", "-C", str(bp.tree), "show", f"{bp.base_commit}:{rel}"], capture_output=True, check=True
        ).stdout
    assert sha256_file(lab.tree / "vmlinux") == sha256_file(lab.vmlinux)
    assert (lab.tree / "kernel/sched/fair.o").stat().st_ino != (series.tree / "kernel/sched/fair.o").stat().st_ino
