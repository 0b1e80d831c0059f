"""Reach Debian suites other than the machine's own (bullseye, bullseye-security, sid deb-src) without
touching the machine's apt configuration (bookworm too: the suite is named, whatever the machine runs).

The mirror hosts are read at run time from the machine's apt sources (/etc/apt/sources.list.d/*.sources
and /etc/apt/sources.list); a private sources list and private list/cache directories live under the
numaforge cache dir and are passed to apt with -o options.

CLI (used by scripts/setup.d): python -m numaforge.debian_apt {update|download|install|source} SUITESET ARGS...
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from .errors import NumaforgeError
from .filelock import locked
from .paths import cache_dir

KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
SUITESETS = {
    # name: list of (archive kind, suite, types)
    "bullseye": [("debian", "bullseye", "deb"), ("security", "bullseye-security", "deb")],
    "sid-src": [("debian", "sid", "deb-src")],
    "bookworm": [("debian", "bookworm", "deb"), ("security", "bookworm-security", "deb")],
}


def machine_mirrors() -> dict[str, str]:
    """{'debian': 'http://host/debian', 'security': 'http://host/debian-security'} from the machine's config."""
    uris: list[str] = []
    parts = Path("/etc/apt/sources.list.d")
    for f in sorted(parts.glob("*.sources")) if parts.is_dir() else []:
        for m in re.finditer(r"^URIs:\s*(.+)$", f.read_text(), re.M):
            uris.extend(m.group(1).split())
    for f in [Path("/etc/apt/sources.list"), *sorted(parts.glob("*.list"))] if parts.is_dir() else []:
        if f.is_file():
            for line in f.read_text().splitlines():
                deb = re.match(r"^\s*deb(?:-src)?\s+(?:\[[^]]*\]\s+)?(\S+)", line)
                if deb:
                    uris.append(deb.group(1))
    mirrors: dict[str, str] = {}
    for u in uris:
        u = u.rstrip("/")
        if u.endswith("debian-security") and "security" not in mirrors:
            mirrors["security"] = u
        elif u.endswith("/debian") and "debian" not in mirrors:
            mirrors["debian"] = u
    if "debian" not in mirrors:
        raise NumaforgeError(
            "no Debian mirror found in the machine's apt sources",
            "/etc/apt/sources.list.d",
            "configure a Debian mirror for apt first",
        )
    if "security" not in mirrors:
        mirrors["security"] = mirrors["debian"] + "-security"
    return mirrors


def _root(suiteset: str) -> Path:
    return cache_dir() / "apt" / suiteset


def apt_options(suiteset: str) -> list[str]:
    root = _root(suiteset)
    lists = root / "lists"
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    (root / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    sources = root / "sources.list"
    mirrors = machine_mirrors()
    lines = [
        f"{types} [signed-by={KEYRING}] {mirrors[kind]} {suite} main" for kind, suite, types in SUITESETS[suiteset]
    ]
    text = "\n".join(lines) + "\n"
    if not sources.exists() or sources.read_text() != text:
        sources.write_text(text)
    return [
        "-o",
        f"Dir::Etc::sourcelist={sources}",
        "-o",
        "Dir::Etc::sourceparts=-",
        "-o",
        f"Dir::State::Lists={lists}",
        "-o",
        f"Dir::Cache::Archives={root / 'archives'}",
        "-o",
        "Dir::Cache::pkgcache=",
        "-o",
        "Dir::Cache::srcpkgcache=",
        "-o",
        "APT::Get::List-Cleanup=0",
    ]


def apt(suiteset: str, *args: str, cwd: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    cmd = ["apt-get", "-q", *apt_options(suiteset), *args]
    proc = subprocess.run(cmd, cwd=cwd, text=True, capture_output=True)
    if check and proc.returncode != 0:
        raise NumaforgeError(
            f"apt-get {' '.join(args)} failed for suite set {suiteset}: {proc.stderr.strip()[-800:]}",
            None,
            f"check network access to the Debian mirror; re-run `python -m numaforge.debian_apt update {suiteset}`",
        )
    return proc


def update(suiteset: str, only_if_missing: bool = False) -> None:
    """apt-get update of the suite set's own lists, one at a time on the machine (setup's kernel step runs two
    downloads side by side; apt-get itself refuses a second update of the same lists: "Could not get lock").
    ``only_if_missing``: checked again under the lock, so a caller that waited on another's update skips its own."""
    with locked(_root(suiteset) / ".numaforge-update.lock"):
        if not (only_if_missing and have_lists(_root(suiteset) / "lists")):
            apt(suiteset, "update")


def have_lists(lists: Path) -> bool:
    """The suite set's package or source lists are there, however apt stored them: plain, or compressed as the
    machine's apt config says (Acquire::GzipIndexes keeps them as ..._Packages.lz4, .gz, .xz)."""
    return any(re.search(r"_(Packages|Sources)(\.\w+)?$", p.name) for p in lists.glob("*_*"))


def ensure_updated(suiteset: str) -> None:
    """Update the suite set's lists once, when it has none (a second caller waiting on the first finds them)."""
    if not have_lists(_root(suiteset) / "lists"):
        update(suiteset, only_if_missing=True)


def policy(suiteset: str, package: str) -> str | None:
    """Candidate version of package in the suite set (None if absent)."""
    ensure_updated(suiteset)
    out = subprocess.run(
        ["apt-cache", *apt_options(suiteset), "policy", package], text=True, capture_output=True
    ).stdout
    m = re.search(r"Candidate:\s*(\S+)", out)
    return None if not m or m.group(1) == "(none)" else m.group(1)


def versions(suiteset: str, package: str) -> list[str]:
    ensure_updated(suiteset)
    out = subprocess.run(
        ["apt-cache", *apt_options(suiteset), "madison", package], text=True, capture_output=True
    ).stdout
    return [line.split("|")[1].strip() for line in out.splitlines() if "|" in line]


def download(suiteset: str, spec: str, dest: str | os.PathLike) -> Path:
    """apt-get download PACKAGE[=VERSION] into dest; returns the .deb path.

    apt-get writes into a directory of this call's own inside dest, and the one .deb it wrote is then renamed into
    dest: two downloads into one dest at once (setup's kernel step fetches two source packages side by side) each
    get their own package, never the other's, and dest never holds a half-written .deb."""
    ensure_updated(suiteset)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    name = spec.split("=")[0]
    with tempfile.TemporaryDirectory(prefix=".download-", dir=dest) as tmp:
        apt(suiteset, "download", spec, cwd=tmp)
        got = sorted(Path(tmp).glob(f"{name}_*.deb"))
        if len(got) != 1:
            raise NumaforgeError(
                f"apt-get download {spec} wrote {', '.join(p.name for p in Path(tmp).iterdir()) or 'nothing'}, "
                f"not one {name}_*.deb",
                str(dest),
                f"check the package name; re-run `python -m numaforge.debian_apt update {suiteset}`",
            )
        out = dest / got[0].name
        os.replace(got[0], out)
    return out


def extract_member(deb: str | os.PathLike, member: str, dest: str | os.PathLike, error=NumaforgeError) -> Path:
    """Write one file of a .deb (``./usr/src/x.tar.xz``) to dest without unpacking the rest; atomic.

    dpkg-deb --fsys-tarfile | tar -xO MEMBER, into dest.part, renamed on success. ``error`` is the
    NumaforgeError subclass the caller wants raised.
    """
    dest = Path(dest)
    tmp = dest.with_name(dest.name + ".part")
    with open(tmp, "wb") as out:
        p1 = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
        p2 = subprocess.run(["tar", "-xO", member], stdin=p1.stdout, stdout=out, stderr=subprocess.PIPE)
        assert p1.stdout is not None  # stdout=PIPE
        p1.stdout.close()
        p1.wait()
    if p1.returncode != 0 or p2.returncode != 0 or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        raise error(
            f"could not extract {member} from the package: {p2.stderr.decode(errors='replace')[-300:]}",
            str(deb),
            "delete the cached .deb and re-run to download it again",
        )
    os.replace(tmp, dest)
    return dest


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    verb, suiteset, *rest = argv
    if verb == "update":
        update(suiteset)
    elif verb == "download":
        for spec in rest[:-1]:
            print(download(suiteset, spec, rest[-1]))
    elif verb == "install":
        ensure_updated(suiteset)
        proc = subprocess.run(
            ["apt-get", "-y", "-q", *apt_options(suiteset), "install", "--no-install-recommends", *rest]
        )
        return proc.returncode
    elif verb == "source":
        ensure_updated(suiteset)
        proc = subprocess.run(
            ["apt-get", "-q", *apt_options(suiteset), "source", "--download-only", *rest[:-1]], cwd=rest[-1]
        )
        return proc.returncode
    elif verb == "policy":
        print(policy(suiteset, rest[0]))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except NumaforgeError as exc:
        print(f"error: {exc.render()}", file=sys.stderr)
        sys.exit(1)
