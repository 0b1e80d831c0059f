"""Get a Linux 5.10 tree as a git repository, from one ``--source SPEC`` string.

SPEC forms (parse_spec is pure; prepare() does the work):

  debian:linux-source-5.10[=VERSION]   Debian package (bullseye / bullseye-security), default VERSION 5.10.262-1
  debian:linux-source-6.12[=VERSION]   Debian's newest kernel source (bookworm-security), default 6.12.118-1~deb12u1:
                                       the base of the series' mainline copy (patches/<series>/mainline/)
  URL@REF                              git URL (https://, ssh://, git://, file://) and a ref (tag, branch, commit)
  PATH[@REF]                           local git tree (work tree or bare repo); REF defaults to HEAD
  PATH.tar[.xz|.gz|.bz2] | PATH.tgz     a source tarball

Tarballs (the Debian package's included) are imported once into a git repo with gitpython and cached by the
tarball's sha256 under cache_dir()/kernel/trees/<sha256>; a warm run finds the finished import and does not
extract again. The import commit is deterministic (fixed author, committer and date), so the same tarball always
gives the same base commit. Git URLs are cloned once into cache_dir()/kernel/clones/.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import git

from ..defaults import DEFAULT_DEBIAN, MAINLINE_DEBIAN
from ..digest import sha256_file
from ..errors import NumaforgeError, ToolMissingError
from ..filelock import locked
from ..paths import cache_dir

# package -> (suite set of numaforge.debian_apt, the suites it names, the default version)
DEBIAN_PACKAGES = {
    "linux-source-5.10": ("bullseye", "bullseye / bullseye-security", DEFAULT_DEBIAN.split("=", 1)[1]),
    "linux-source-6.12": ("bookworm", "bookworm / bookworm-security", MAINLINE_DEBIAN.split("=", 1)[1]),
}
TARBALL_SUFFIXES = (".tar", ".tar.xz", ".txz", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2")
IMPORT_IDENTITY = {
    "GIT_AUTHOR_NAME": "numaforge import",
    "GIT_AUTHOR_EMAIL": "numaforge@localhost",
    "GIT_COMMITTER_NAME": "numaforge import",
    "GIT_COMMITTER_EMAIL": "numaforge@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}
IMPORT_MARKER = "numaforge-import.json"  # inside .git: written last, so its presence means "import finished"

SPEC_FIX = (
    "use debian:linux-source-5.10[=VERSION] (or linux-source-6.12), URL@REF (git URL and ref), a local git tree PATH[@REF] "
    "or a tarball path (.tar.xz/.tar.gz/.tgz/.tar)"
)


class SourceError(NumaforgeError):
    """The --source SPEC is malformed, names something that does not exist, or cannot be fetched."""

    exit_code = 2


@dataclass(frozen=True)
class SourceSpec:
    kind: str  # "debian" | "git-url" | "local-git" | "tarball"
    raw: str
    location: str  # package name, URL, or path
    ref: str | None = None  # git ref (git-url/local-git); Debian version (debian)

    @property
    def canonical(self) -> str:
        """The spec with defaults filled in: debian:linux-source-5.10 -> debian:linux-source-5.10=5.10.262-1."""
        if self.kind == "debian":
            return f"debian:{self.location}={self.ref}"
        if self.kind in ("git-url", "local-git"):
            return f"{self.location}@{self.ref}"
        return self.location


@dataclass
class Source:
    spec: SourceSpec
    repo: Path  # git repository (work tree) the series is applied in
    base_commit: str
    base_version: str  # from the tree's Makefile, e.g. "5.10.262"
    source_hash: str  # sha256:<tarball> or git:<commit>
    imported: bool = False  # True when this run imported a tarball (cold run)


# ---------------------------------------------------------------- pure parts


def parse_spec(spec: str, exists=os.path.exists, isdir=os.path.isdir) -> SourceSpec:
    """Classify a --source SPEC. Pure apart from the two filesystem predicates (injectable for tests)."""
    raw = (spec or "").strip()
    if not raw:
        raise SourceError("empty --source", None, SPEC_FIX)
    if raw.startswith("debian:"):
        body = raw[len("debian:") :]
        pkg, _, ver = body.partition("=")
        if pkg not in DEBIAN_PACKAGES:
            raise SourceError(
                f"unknown Debian source package {pkg!r}",
                raw,
                f"use one of {', '.join(sorted(DEBIAN_PACKAGES))}, e.g. {DEFAULT_DEBIAN}",
            )
        if "=" in body and not re.fullmatch(r"[0-9][A-Za-z0-9.+~:-]*", ver):
            raise SourceError(
                f"malformed Debian version {ver!r}",
                raw,
                "give a version as apt shows it, e.g. debian:linux-source-5.10=5.10.223-1",
            )
        return SourceSpec("debian", raw, pkg, ver or DEBIAN_PACKAGES[pkg][2])
    if re.match(r"^[a-z][a-z0-9+.-]*://", raw) or re.match(r"^[\w.-]+@[\w.-]+:", raw):
        url, ref = _split_url_ref(raw)
        if not ref:
            raise SourceError(
                "git URL without a ref",
                raw,
                "append @REF, e.g. https://host/linux.git@v5.10.262 or file:///srv/linux.git@main",
            )
        return SourceSpec("git-url", raw, url, ref)
    if raw.lower().endswith(TARBALL_SUFFIXES):
        if not exists(raw):
            raise SourceError("tarball not found", raw, "check the path; " + SPEC_FIX)
        return SourceSpec("tarball", raw, os.path.abspath(raw))
    path, ref = raw, None
    if not exists(raw) and "@" in raw:
        path, _, ref = raw.rpartition("@")
    if isdir(path):
        return SourceSpec("local-git", raw, os.path.abspath(path), ref or "HEAD")
    raise SourceError("source not found (not a Debian package spec, git URL, directory or tarball)", raw, SPEC_FIX)


def _split_url_ref(raw: str) -> tuple[str, str | None]:
    """'https://h/r.git@v1' -> ('https://h/r.git', 'v1'); 'ssh://git@h/r' has no ref (the @ is the user)."""
    head, sep, tail = raw.rpartition("@")
    if not sep:
        return raw, None
    scheme_rest = head.split("://", 1)[1] if "://" in head else head.split(":", 1)[-1]
    if "://" in head and "/" not in scheme_rest:
        return raw, None  # the @ separated user and host
    if "://" not in head and ":" not in head:
        return raw, None  # scp-like user@host:path without ref
    if not tail or ":" in tail:
        return raw, None
    return head, tail


def parse_kernel_version(makefile_text: str, where: str = "Makefile") -> str:
    """'5.10.262' from the top-level Makefile's VERSION / PATCHLEVEL / SUBLEVEL lines."""
    vals = {}
    for key in ("VERSION", "PATCHLEVEL", "SUBLEVEL"):
        m = re.search(rf"^{key}\s*=\s*(\d+)\s*$", makefile_text, re.M)
        if not m:
            raise SourceError(
                f"no {key} line in the kernel Makefile",
                where,
                "point --source at a Linux source tree (top-level Makefile with VERSION/PATCHLEVEL)",
            )
        vals[key] = m.group(1)
    return f"{vals['VERSION']}.{vals['PATCHLEVEL']}.{vals['SUBLEVEL']}"


# ---------------------------------------------------------------- adapters


def kernel_cache() -> Path:
    p = cache_dir() / "kernel"
    p.mkdir(parents=True, exist_ok=True)
    return p


def _need(tool: str, pkg: str) -> None:
    if shutil.which(tool) is None:
        raise ToolMissingError(f"{tool} not found", None, f"run scripts/setup.sh (installs {pkg})")


def debian_tarball(pkg: str, version: str, log=None) -> tuple[Path, str]:
    """Download pkg=version (cached) and extract only its source tarball; returns (tarball, sha256).

    An index file per package version records the tarball and its hash, checked by size and mtime, so a warm
    run neither downloads nor re-hashes."""
    root = kernel_cache() / "debian"
    root.mkdir(parents=True, exist_ok=True)
    index = root / f"{pkg}_{version}.json"
    if index.exists():
        try:
            meta = json.loads(index.read_text())
            tb = Path(meta["tarball"])
            st = tb.stat()
            if st.st_size == meta["size"] and int(st.st_mtime) == meta["mtime"]:
                return tb, meta["sha256"]
        except (OSError, ValueError, KeyError):
            pass
    with locked(root / f".{pkg}_{version}.lock"):
        return _debian_tarball(pkg, version, index, root, log)


def _debian_tarball(pkg: str, version: str, index: Path, root: Path, log) -> tuple[Path, str]:
    from .. import debian_apt

    debs = kernel_cache() / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    deb = debs / f"{pkg}_{version.split(':')[-1]}_all.deb"
    if not deb.exists():
        suiteset, suites, _default = DEBIAN_PACKAGES[pkg]
        known = debian_apt.versions(suiteset, pkg)
        if version not in known:
            raise SourceError(
                f"{pkg} version {version} is not in {suites}",
                f"debian:{pkg}={version}",
                f"pick one of: {', '.join(known) or f'(none: run python -m numaforge.debian_apt update {suiteset})'}",
            )
        if log:
            log(f"downloading {pkg}={version}")
        deb = debian_apt.download(suiteset, f"{pkg}={version}", debs)
    _need("dpkg-deb", "dpkg")
    member = f"./usr/src/{pkg}.tar.xz"
    tarball = root / f"{pkg}_{version.split(':')[-1]}.tar.xz"
    debian_apt.extract_member(deb, member, tarball, error=SourceError)
    digest = sha256_file(tarball)
    st = tarball.stat()
    index.write_text(
        json.dumps(
            {"tarball": str(tarball), "sha256": digest, "size": st.st_size, "mtime": int(st.st_mtime), "deb": str(deb)},
            indent=1,
        )
    )
    return tarball, digest


def import_tarball(tarball: Path, digest: str, log=None) -> tuple[Path, bool]:
    """Import the tarball into cache_dir()/kernel/trees/<sha256> once; returns (repo path, imported now?)."""
    trees = kernel_cache() / "trees"
    trees.mkdir(parents=True, exist_ok=True)
    dest = trees / digest
    if not (dest / ".git" / IMPORT_MARKER).exists():
        with locked(trees / f".{digest}.lock"):
            dest, imported = _import_tarball(tarball, digest, dest, trees, log)
            if imported:
                return dest, True
    _no_auto_gc(dest)  # a tree imported by an older numaforge
    return dest, False


def _no_auto_gc(repo: Path) -> None:
    """An imported tree holds ~70,000 loose objects: the `git gc --auto` that `git am` and `git commit` start would
    repack them in the background for minutes, at whatever moment a backport happens to cross the threshold. The
    cache's repos are numaforge's own: their objects stay loose (disk is not the scarce thing here, CPU is)."""
    cfg = repo / ".git" / "config"
    if "auto = 0" not in cfg.read_text(errors="replace"):
        subprocess.run(["git", "-C", str(repo), "config", "gc.auto", "0"], check=True, capture_output=True)


def _import_tarball(tarball: Path, digest: str, dest: Path, trees: Path, log) -> tuple[Path, bool]:
    if (dest / ".git" / IMPORT_MARKER).exists():  # another run finished it while we waited
        return dest, False
    if dest.exists():  # an interrupted import: start over
        shutil.rmtree(dest)
    if log:
        log(f"importing {tarball.name} into a git repo (once per tarball)")
    tmp = Path(tempfile.mkdtemp(prefix=f".import-{digest[:12]}-", dir=trees))
    try:
        unpack = tmp / "unpack"
        unpack.mkdir()
        proc = subprocess.run(
            ["tar", "-xf", str(tarball), "-C", str(unpack), "--no-same-owner"], capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise SourceError(
                f"tarball cannot be extracted: {proc.stderr.strip()[-300:]}",
                str(tarball),
                "check the file is a complete .tar/.tar.xz/.tar.gz (re-download it)",
            )
        entries = list(unpack.iterdir())
        top = entries[0] if len(entries) == 1 and entries[0].is_dir() else unpack
        if not (top / "Makefile").exists():
            raise SourceError(
                "tarball has no top-level kernel Makefile",
                str(tarball),
                "give a Linux source tarball (one top directory holding Makefile, kernel/, ...)",
            )
        repo = git.Repo.init(top)
        repo.git.config("gc.auto", "0")  # before the import's own commit (see _no_auto_gc)
        env = dict(IMPORT_IDENTITY)
        with repo.git.custom_environment(**env):
            # a tarball may ship files its own .gitignore would hide; import exactly what is in it
            repo.git.add("--all", "--force", ".")
            repo.git.commit("--quiet", "--no-verify", "-m", f"import {tarball.name}\n\nsha256: {digest}")
        repo.git.tag("numaforge-base")
        repo.close()
        (top / ".git" / IMPORT_MARKER).write_text(json.dumps({"tarball": str(tarball), "sha256": digest}))
        os.replace(top, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest, True


def _clone_url(url: str, ref: str, log=None) -> Path:
    clones = kernel_cache() / "clones"
    clones.mkdir(parents=True, exist_ok=True)
    dest = clones / hashlib.sha256(url.encode()).hexdigest()[:24]
    try:
        if not (dest / ".git").exists():
            if dest.exists():
                shutil.rmtree(dest)
            if log:
                log(f"cloning {url}")
            git.Repo.clone_from(url, dest)
        repo = git.Repo(dest)
        try:
            repo.git.rev_parse("--verify", "--quiet", f"{ref}^{{commit}}")
        except git.GitCommandError:
            repo.git.fetch("origin", "--tags", "--quiet", "+refs/heads/*:refs/remotes/origin/*")
            try:
                repo.git.rev_parse("--verify", "--quiet", f"{ref}^{{commit}}")
            except git.GitCommandError:
                try:
                    repo.git.fetch("origin", "--quiet", ref)
                except git.GitCommandError:
                    raise SourceError(
                        f"ref {ref!r} not found", url, "give a tag, branch or commit the remote has (git ls-remote URL)"
                    ) from None
        return dest
    except git.GitCommandError as exc:
        raise SourceError(
            f"git could not clone/fetch: {exc.stderr.strip()[-300:]}",
            url,
            "check the URL is reachable and the ref exists (git ls-remote URL)",
        ) from None


def export_tree(repo: str | Path, commit: str, dest: str | Path) -> bool:
    """Write the files of ``commit`` (no .git) into the existing directory ``dest``: git archive | tar -x.
    False when either side failed (the caller says what to do)."""
    arch = subprocess.Popen(["git", "-C", str(repo), "archive", "--format=tar", commit], stdout=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-C", str(dest)], stdin=arch.stdout, capture_output=True)
    assert arch.stdout is not None  # stdout=PIPE
    arch.stdout.close()
    return arch.wait() == 0 and untar.returncode == 0


def resolve_commit(repo: git.Repo, ref: str, where: str) -> str:
    for cand in (ref, f"origin/{ref}"):
        try:
            return repo.git.rev_parse("--verify", "--quiet", f"{cand}^{{commit}}")
        except git.GitCommandError:
            continue
    raise SourceError(f"ref {ref!r} not found", where, "give a tag, branch or commit that exists in the repo")


def prepare(spec_text: str, log=None) -> Source:
    """Resolve SPEC to a git repo + base commit; imports/clones once and reuses the cache afterwards."""
    spec = parse_spec(spec_text)
    imported = False
    if spec.kind in ("debian", "tarball"):
        if spec.kind == "debian":
            assert spec.ref is not None  # parse_spec gives debian specs a version
            tarball, digest = debian_tarball(spec.location, spec.ref, log)
        else:
            tarball = Path(spec.location)
            digest = sha256_file(tarball)
        repo_path, imported = import_tarball(tarball, digest, log)
        repo = git.Repo(repo_path)
        base = repo.git.rev_parse("numaforge-base^{commit}")
        source_hash = f"sha256:{digest}"
    else:
        if spec.kind == "git-url":
            assert spec.ref is not None  # parse_spec refuses a git URL without a ref
            repo_path = _clone_url(spec.location, spec.ref, log)
        else:
            repo_path = Path(spec.location)
        try:
            repo = git.Repo(repo_path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise SourceError(
                "not a git repository",
                str(repo_path),
                "give a git work tree, or a tarball path, or git init/commit the tree first",
            ) from None
        if repo.bare:
            raise SourceError(
                "bare repository: backport needs a work tree",
                str(repo_path),
                f"use it as a URL instead: file://{repo_path}@REF",
            )
        base = resolve_commit(repo, spec.ref or "HEAD", spec.raw)
        source_hash = f"git:{base}"
    try:
        makefile = repo.git.show(f"{base}:Makefile")
    except git.GitCommandError:
        raise SourceError(
            "no top-level Makefile at the base commit",
            f"{repo_path}@{base[:12]}",
            "point --source at a Linux kernel tree",
        ) from None
    version = parse_kernel_version(makefile, f"{repo_path}/Makefile@{base[:12]}")
    repo.close()
    return Source(spec, Path(repo_path), base, version, source_hash, imported)


def main(argv: list[str]) -> int:
    """python -m numaforge.kernel.source prefetch SPEC...  (used by scripts/setup.d/20-kernel-toolchain.sh)"""
    if len(argv) < 2 or argv[0] != "prefetch":
        print(main.__doc__)
        return 2
    for spec in argv[1:]:
        try:
            src = prepare(spec, log=lambda m: print(f"source: {m}", flush=True))
        except NumaforgeError as exc:
            print(f"error: {exc.render()}", file=sys.stderr)
            return exc.exit_code
        print(
            f"source: {spec} -> {src.repo} base {src.base_version} {src.base_commit[:12]}"
            f" ({'imported' if src.imported else 'cached'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
