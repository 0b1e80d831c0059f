"""Apply a patch series onto a 5.10 tree with ``git am --3way``; report conflicts precisely and restore the
tree; write one combined patch for kpatch-build and a manifest.

Contract used by the kpatch step:
    backport(source_spec, series="sched-numa-prefer-local-fallback", compilers=("gcc-12", "gcc-10"),
             compile_check=True) -> BackportResult
    latest(series, base_version=None) -> BackportResult | None
Files: build/backport/<series>/<base_version>/{combined.patch,manifest.json}.

The result branch is ``backport/<series>/<base_version>``. Commits are made with a fixed committer and
--committer-date-is-author-date, so the same base + series always gives the same result commit; a re-run
whose base, series hashes and branch head match the recorded state does nothing.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import __version__
from ..defaults import DEFAULT_SERIES
from ..errors import NumaforgeError
from ..filelock import locked
from ..paths import atomic_write_text, build_dir, project_dir
from . import compile as kcompile
from . import source as ksource
from .series import Hunk, Patch, Series, SeriesError, load_series

AM_IDENTITY = {"GIT_COMMITTER_NAME": "numaforge backport", "GIT_COMMITTER_EMAIL": "numaforge@localhost"}
# a no-reply alias (GitHub's <id>+<user>@users.noreply.github.com and the like): mail to it reaches nobody
NOREPLY = re.compile(r"(^|[.@+_-])no-?reply([.@+_-]|$)", re.IGNORECASE)


class BackportError(NumaforgeError):
    """The tree cannot take the series (dirty tree, am in progress)."""

    exit_code = 2


class ConflictError(NumaforgeError):
    """A patch does not apply; `detail` holds patch, file, hunk and the conflicting lines."""

    exit_code = 4

    def __init__(self, what, where=None, fix=None, detail: dict | None = None):
        self.detail = detail or {}
        super().__init__(what, where, fix)


@dataclass
class BackportResult:
    tree: Path
    base_version: str
    source_hash: str
    result_commit: str
    combined_patch: Path
    manifest: dict
    base_commit: str = ""
    branch: str = ""
    status: str = "applied"  # "applied" | "unchanged"
    compile: list[dict] = field(default_factory=list)


def output_dir(series: str, base_version: str) -> Path:
    return build_dir() / "backport" / series / base_version


# ---------------------------------------------------------------- pure: conflict analysis


def locate_hunk(file_lines: list[str], hunk: Hunk) -> int | None:
    """0-based line where the hunk's pre-image matches exactly (nearest to its stated start), else None."""
    pre = hunk.preimage
    if not pre:
        return max(hunk.old_start - 1, 0)
    want = hunk.old_start - 1
    best = None
    for i in range(0, len(file_lines) - len(pre) + 1):
        if file_lines[i] == pre[0] and file_lines[i : i + len(pre)] == pre:
            if best is None or abs(i - want) < abs(best - want):
                best = i
    return best


def conflicting_hunks(file_lines: list[str], hunks: list[Hunk]) -> list[dict]:
    """For each hunk whose pre-image is not in the file: the hunk and what it expects vs what the tree has."""
    out = []
    for h in hunks:
        if locate_hunk(file_lines, h) is not None:
            continue
        start = max(h.old_start - 1, 0)
        actual = file_lines[start : start + max(h.old_len, 1)]
        diff = list(difflib.unified_diff(h.preimage, actual, "patch expects", "tree has", lineterm="", n=0))
        first = next(
            (i for i, (e, a) in enumerate(zip(h.preimage, actual)) if e != a), min(len(h.preimage), len(actual))
        )
        out.append(
            {
                "file": h.file,
                "hunk": h.index,
                "header": h.header,
                "patch_line": h.patch_line,
                "hunk_start": h.old_start,
                "line": h.old_start + first,
                "expected": h.preimage,
                "found": actual,
                "diff": [d for d in diff[2:] if not d.startswith("@@")],
            }
        )
    return out


def conflict_markers(text: str) -> list[dict]:
    """<<<<<<< / ======= / >>>>>>> regions left by a 3-way merge, with their 1-based line numbers."""
    regions: list[dict] = []
    cur: dict[str, Any] | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("<<<<<<<"):
            cur = {"start": n, "ours": [], "theirs": [], "side": "ours"}
        elif cur is not None and line.startswith("=======") and cur["side"] == "ours":
            cur["side"] = "theirs"
        elif cur is not None and line.startswith(">>>>>>>"):
            cur["end"] = n
            del cur["side"]
            regions.append(cur)
            cur = None
        elif cur is not None:
            if line.startswith("|||||||"):
                cur["side"] = "base"
                cur["base"] = []
            else:
                cur[cur["side"]].append(line)
    return regions


def render_conflict(detail: dict) -> str:
    lines = [f"patch {detail['patch']} ({detail['subject']}) does not apply to {detail['base']}"]
    for h in detail.get("hunks", []):
        lines.append(f"  {h['file']}:{h['line']} hunk {h['hunk']} {h['header']} (patch line {h['patch_line']})")
        lines.extend(f"    {'patch expects' if d[:1] == '-' else 'tree has     '}: {d[1:]}" for d in h["diff"][:40])
    for f, regions in detail.get("markers", {}).items():
        for r in regions:
            lines.append(f"  3-way conflict {f}:{r['start']}-{r['end']}")
    if not detail.get("hunks") and detail.get("git"):
        lines.append("  git: " + detail["git"].strip().replace("\n", "\n  git: "))
    return "\n".join(lines)


# ---------------------------------------------------------------- git adapter


def _git(repo: Path, *args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    if check and proc.returncode != 0:
        raise BackportError(
            f"git {' '.join(args[:3])} failed: {proc.stderr.strip()[-400:]}",
            str(repo),
            "inspect the repository with git status; re-run once it is clean",
        )
    return proc


def tree_state(repo: Path) -> dict:
    """What must be identical before and after a failed run: HEAD, symbolic ref, branches, status."""
    head = _git(repo, "rev-parse", "HEAD").stdout.strip()
    sym = _git(repo, "symbolic-ref", "-q", "HEAD", check=False).stdout.strip() or None
    refs = _git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads").stdout
    status = _git(repo, "status", "--porcelain=v1", "--untracked-files=all").stdout
    return {"head": head, "symref": sym, "branches": refs, "status": status}


def _state_file(repo: Path, branch: str) -> Path:
    gitdir = Path(_git(repo, "rev-parse", "--absolute-git-dir").stdout.strip())
    return gitdir / "numaforge" / (branch.replace("/", "__") + ".json")


def recorded_base(repo: Path, branch: str) -> str | None:
    """Base commit recorded for `branch` if HEAD is that branch at its recorded result, else None."""
    head = _git(repo, "symbolic-ref", "-q", "HEAD", check=False).stdout.strip()
    state = _state_file(repo, branch)
    if head != f"refs/heads/{branch}" or not state.exists():
        return None
    try:
        rec = json.loads(state.read_text())
    except ValueError:
        return None
    if rec.get("result") != _git(repo, "rev-parse", "HEAD").stdout.strip():
        return None
    return rec.get("wanted", {}).get("base_commit")


def user_identity(cwd: Path | None = None) -> dict:
    """The user's git identity (`git config user.name` / `user.email`, as git resolves them in the project
    directory) as GIT_COMMITTER_* variables, for `backport --signoff`."""
    vals = {}
    for key in ("user.name", "user.email"):
        r = subprocess.run(["git", "config", key], cwd=cwd or project_dir(), text=True, capture_output=True)
        vals[key] = r.stdout.strip()
    missing = [k for k, v in vals.items() if not v]
    if missing:
        raise BackportError(
            f"--signoff needs your git identity, but {' and '.join(missing)} is not set",
            "git config",
            "set it: git config --global user.name 'Your Name'; git config --global user.email you@example.org",
        )
    if NOREPLY.search(vals["user.email"]):
        # Documentation/process/submitting-patches.rst: a Signed-off-by certifies the DCO "using a known
        # identity (sorry, no anonymous contributions.)"; a maintainer cannot reach a no-reply alias
        raise BackportError(
            f"--signoff would sign the DCO as {vals['user.email']!r}, a no-reply alias: the kernel's DCO wants a "
            "known identity that reviewers can write to",
            "git config user.email",
            "set your real address for this checkout: git config user.email you@example.org (or leave out --signoff)",
        )
    return {"GIT_COMMITTER_NAME": vals["user.name"], "GIT_COMMITTER_EMAIL": vals["user.email"]}


def apply_series(
    repo: Path, base_commit: str, branch: str, series: Series, base_label: str, log=None, signoff: dict | None = None
) -> tuple[str, str]:
    """Apply the series on `branch` (created at base_commit); returns (result_commit, "applied"|"unchanged").

    signoff: a committer identity (user_identity()): the commits are made by it and `git am --signoff` adds its
    Signed-off-by (git adds none when the patch's last trailer already is that line). Without it the committer
    is the fixed AM_IDENTITY and each patch keeps exactly its own trailers.

    On failure the tree is restored (git am --abort, original HEAD/branch, branch ref as before) and a
    ConflictError describing the patch, file, hunk and lines is raised."""
    gitdir = Path(_git(repo, "rev-parse", "--absolute-git-dir").stdout.strip())
    if (gitdir / "rebase-apply").exists() or (gitdir / "rebase-merge").exists():
        raise BackportError(
            "a git am/rebase is in progress in the tree",
            str(repo),
            "finish it or run `git am --abort` / `git rebase --abort` there, then re-run",
        )
    dirty = _git(repo, "status", "--porcelain=v1", "--untracked-files=no").stdout
    if dirty.strip():
        files = ", ".join(line[3:] for line in dirty.splitlines()[:5])
        raise BackportError(
            f"tree has uncommitted changes ({files})", str(repo), "commit or stash them (git stash) before backporting"
        )
    wanted = {
        "base_commit": base_commit,
        "series": series.name,
        "files": series.file_hashes,
        "patches": [p.sha256 for p in series.patches],
        "signoff": signoff or None,
    }
    state = _state_file(repo, branch)
    existing = _git(repo, "rev-parse", "-q", "--verify", f"refs/heads/{branch}", check=False).stdout.strip() or None
    if existing and state.exists():
        try:
            rec = json.loads(state.read_text())
        except ValueError:
            rec = {}
        if rec.get("wanted") == wanted and rec.get("result") == existing:
            cur = _git(repo, "symbolic-ref", "-q", "HEAD", check=False).stdout.strip()
            if cur != f"refs/heads/{branch}":
                _git(repo, "checkout", "-q", branch)
            return existing, "unchanged"
    before = tree_state(repo)
    try:
        _git(repo, "checkout", "-q", "-B", branch, base_commit)
        am = _git(
            repo,
            "am",
            "--3way",
            "--committer-date-is-author-date",
            "--no-gpg-sign",
            *(["--signoff"] if signoff else []),
            *[str(p.path) for p in series.patches],
            env=signoff or AM_IDENTITY,
            check=False,
        )
    except BaseException:  # Ctrl-C or a git failure mid-way: put the tree back before leaving
        _restore(repo, branch, before, existing, signoff)
        raise
    if am.returncode == 0:
        result = _git(repo, "rev-parse", "HEAD").stdout.strip()
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text(json.dumps({"wanted": wanted, "result": result}, indent=1))
        return result, "applied"
    detail = _describe_failure(repo, gitdir, series, am.stdout + am.stderr, base_label)
    _restore(repo, branch, before, existing, signoff)
    raise ConflictError(
        render_conflict(detail),
        _where(detail),
        "rebase the patch onto this base (git am --3way, resolve, git format-patch) and add it as "
        f"a per-base variant under variants/{base_label.split()[0]} in metadata.yaml",
        detail,
    )


def _where(detail: dict) -> str:
    hunks = detail.get("hunks") or []
    if hunks:
        h = hunks[0]
        return f"{h['file']}:{h['line']} (hunk {h['hunk']} of {detail['patch']})"
    files = detail.get("files") or []
    return f"{files[0] if files else '?'} ({detail['patch']})"


def _describe_failure(repo: Path, gitdir: Path, series: Series, output: str, base_label: str) -> dict:
    ra = gitdir / "rebase-apply"
    try:
        idx = int((ra / "next").read_text().strip()) - 1
    except (OSError, ValueError):
        idx = 0
    patch: Patch = series.patches[min(max(idx, 0), len(series.patches) - 1)]
    unmerged = [f for f in _git(repo, "diff", "--name-only", "--diff-filter=U").stdout.split() if f]
    markers = {}
    for f in unmerged:
        try:
            markers[f] = conflict_markers((repo / f).read_text(errors="replace"))
        except OSError:
            pass
    hunks: list[dict] = []
    for f in dict.fromkeys(patch.files):
        shown = _git(repo, "show", f"HEAD:{f}", check=False)
        if shown.returncode != 0:
            continue
        hunks.extend(conflicting_hunks(shown.stdout.split("\n"), patch.hunks_for(f)))
    for f in dict.fromkeys(patch.files):
        if (
            _git(repo, "cat-file", "-e", f"HEAD:{f}", check=False).returncode != 0
            and patch.hunks_for(f)
            and any(h.old_len for h in patch.hunks_for(f))
        ):
            hunks.append(
                {
                    "file": f,
                    "hunk": 1,
                    "header": "(file)",
                    "patch_line": patch.hunks_for(f)[0].patch_line,
                    "line": 0,
                    "expected": [],
                    "found": [],
                    "diff": [f"{f} does not exist in the tree"],
                }
            )
    git_lines = [ln for ln in output.splitlines() if ln.startswith(("error:", "CONFLICT", "Patch failed"))]
    return {
        "patch": patch.variant_of or patch.name,
        "patch_file": str(patch.path),
        "subject": patch.subject,
        "base": base_label,
        "files": sorted(set(unmerged) | {h["file"] for h in hunks}),
        "hunks": hunks,
        "markers": markers,
        "git": "\n".join(git_lines),
    }


def _restore(repo: Path, branch: str, before: dict, existing: str | None, env: dict | None = None) -> None:
    # with the identity the am ran with: git refuses `am --abort` without a committer identity, and a build
    # server's account often has none (that left .git/rebase-apply behind on a fresh machine)
    _git(repo, "am", "--abort", env=env or AM_IDENTITY, check=False)
    gitdir = Path(_git(repo, "rev-parse", "--absolute-git-dir").stdout.strip())
    if (gitdir / "rebase-apply").exists():
        raise BackportError(
            "git am --abort left the am in progress (.git/rebase-apply)",
            str(repo),
            "run `git am --abort` there (set user.name/user.email if git asks for them), then re-run",
        )
    if before["symref"]:
        _git(repo, "checkout", "-q", "-f", before["symref"].removeprefix("refs/heads/"))
    else:
        _git(repo, "checkout", "-q", "-f", "--detach", before["head"])
    if before["symref"] != f"refs/heads/{branch}":
        if existing:
            _git(repo, "branch", "-f", branch, existing)
        else:
            _git(repo, "branch", "-D", branch, check=False)
    else:
        _git(repo, "reset", "-q", "--hard", existing or before["head"])
    after = tree_state(repo)
    if after != before:
        raise BackportError(
            "could not restore the tree to its pre-run state",
            str(repo),
            f"check `git status` and `git branch` there; HEAD was {before['head']}",
        )


def combined_diff(repo: Path, base_commit: str, result_commit: str, series: Series) -> str:
    """One unified diff for kpatch-build: the whole series, or only its kpatch: true patches in order."""
    if all(p.kpatch for p in series.patches):
        return _git(repo, "diff", "--no-color", "--no-ext-diff", "--full-index", base_commit, result_commit).stdout
    commits = _git(repo, "rev-list", "--reverse", f"{base_commit}..{result_commit}").stdout.split()
    parts = [
        _git(repo, "show", "--no-color", "--no-ext-diff", "--full-index", "--format=", c).stdout
        for c, p in zip(commits, series.patches)
        if p.kpatch
    ]
    return "".join(parts)


def check_applies_to_base(repo: Path, base_commit: str, text: str, series: Series) -> None:
    """kpatch-build applies combined.patch to the unpatched base: prove it does (temporary index, tree untouched)."""
    if not text.strip():
        raise SeriesError(
            f"series {series.name} has no kpatch: true patch, so there is nothing for kpatch-build",
            str(series.dir / "metadata.yaml"),
            "mark the live-patchable patches kpatch: true",
        )
    gitdir = Path(_git(repo, "rev-parse", "--absolute-git-dir").stdout.strip())
    fd, idx = tempfile.mkstemp(prefix="combined-check.", suffix=".index", dir=gitdir)
    os.close(fd)
    os.unlink(idx)
    try:
        env = {"GIT_INDEX_FILE": idx}
        _git(repo, "read-tree", base_commit, env=env)
        proc = subprocess.run(
            ["git", "-C", str(repo), "apply", "--cached", "--check", "-"],
            input=text,
            capture_output=True,
            text=True,
            env={**os.environ, **env},
        )
    finally:
        Path(idx).unlink(missing_ok=True)
    if proc.returncode != 0:
        raise SeriesError(
            "the kpatch: true patches do not apply to the base without the kpatch: false ones: "
            + proc.stderr.strip()[-400:],
            str(series.dir / "metadata.yaml"),
            "order the series so kpatch: true patches come first, or rebase them onto the base",
        )


# ---------------------------------------------------------------- orchestration


def backport(
    source_spec: str = ksource.DEFAULT_DEBIAN,
    series: str = DEFAULT_SERIES,
    compilers=("gcc-12", "gcc-10"),
    compile_check: bool = True,
    log=None,
    signoff: bool = False,
) -> BackportResult:
    """signoff: commit as the user's git identity and add its Signed-off-by (git am --signoff)."""
    ident = user_identity() if signoff else None
    src = ksource.prepare(source_spec, log)
    ser = load_series(series, base_version=src.base_version)
    gitdir = Path(_git(src.repo, "rev-parse", "--absolute-git-dir").stdout.strip())
    with locked(gitdir / "numaforge" / "lock"):  # one backport at a time per tree
        return _backport(src, ser, compilers, compile_check, log, ident)


def _compile_checks(src, ser: Series, compilers, out: Path, result: str, log) -> list[dict]:
    """Each compiler's check configures and builds its own object directory: run them side by side (each
    make's serial configure/prepare steps leave the other core idle); results in the compilers' order."""
    objects = ser.touched_objects()
    with ThreadPoolExecutor(max_workers=max(1, len(compilers))) as pool:
        futures = [
            pool.submit(kcompile.check, src.repo, objects, cc, out / f"obj-{cc}", ser.compile_config, result, log=log)
            for cc in compilers
        ]
        return [f.result() for f in futures]


def _backport(src, ser: Series, compilers, compile_check: bool, log, signoff: dict | None = None) -> BackportResult:
    branch = f"backport/{ser.name}/{src.base_version}"
    if src.spec.kind == "local-git" and src.spec.ref == "HEAD":
        # a re-run on a tree we left checked out at our result branch: the base is the recorded one, not HEAD
        recorded = recorded_base(src.repo, branch)
        if recorded:
            src.base_commit, src.source_hash = recorded, f"git:{recorded}"
    result, status = apply_series(
        src.repo,
        src.base_commit,
        branch,
        ser,
        f"{src.base_version} ({src.spec.raw} at {src.base_commit[:12]})",
        log,
        signoff,
    )
    out = output_dir(ser.name, src.base_version)
    stale = out / "manifest.json"
    if stale.exists():
        try:
            if json.loads(stale.read_text()).get("result_commit") != result:
                stale.unlink()  # latest() must not offer an older result while this one is unchecked
        except ValueError:
            stale.unlink()
    combined = out / "combined.patch"
    text = combined_diff(src.repo, src.base_commit, result, ser)
    if not combined.exists() or combined.read_text() != text:
        check_applies_to_base(src.repo, src.base_commit, text, ser)
        atomic_write_text(combined, text)
    checks = _compile_checks(src, ser, compilers, out, result, log) if compile_check else []
    manifest = {
        "series": ser.name,
        "series_dir": str(ser.dir),
        "base_version": src.base_version,
        "source_spec": src.spec.canonical,
        "source_spec_given": src.spec.raw,
        "source_kind": src.spec.kind,
        "source_hash": src.source_hash,
        "base_commit": src.base_commit,
        "branch": branch,
        "result_commit": result,
        "tree": str(src.repo),
        "status": status,
        "source_imported": src.imported,
        "patches": [
            {
                "file": p.name,
                "applied_file": str(p.path.relative_to(ser.dir)),
                "sha256": p.sha256,
                "subject": p.subject,
                "kpatch": p.kpatch,
                "variant": p.variant_of is not None,
                "files": p.files,
            }
            for p in ser.patches
        ],
        "series_files": ser.file_hashes,
        "touched_objects": ser.touched_objects(),
        "combined_patch": str(combined),
        "combined_patch_sha256": ksource.sha256_file(combined),
        "compile_check": compile_check,
        "signoff": signoff or None,
        "compilers": checks,
        "loaded_check": str(ser.dir / ser.metadata["loaded_check"]) if ser.metadata.get("loaded_check") else None,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "numaforge_version": __version__,
    }
    atomic_write_text(out / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    return _result(manifest)


def _result(m: dict) -> BackportResult:
    return BackportResult(
        tree=Path(m["tree"]),
        base_version=m["base_version"],
        source_hash=m["source_hash"],
        result_commit=m["result_commit"],
        combined_patch=Path(m["combined_patch"]),
        manifest=m,
        base_commit=m["base_commit"],
        branch=m["branch"],
        status=m["status"],
        compile=m.get("compilers", []),
    )


def latest(series: str = DEFAULT_SERIES, base_version: str | None = None) -> BackportResult | None:
    """The newest recorded backport of `series` (optionally for one base version), or None."""
    root = build_dir() / "backport" / series
    found = []
    for mf in root.glob("*/manifest.json"):
        try:
            m = json.loads(mf.read_text())
        except (OSError, ValueError):
            continue
        if base_version and m.get("base_version") != base_version:
            continue
        found.append((m.get("created", ""), mf.stat().st_mtime, m))
    if not found:
        return None
    return _result(max(found, key=lambda t: (t[0], t[1]))[2])
