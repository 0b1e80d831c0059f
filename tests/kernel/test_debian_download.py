"""numaforge.debian_apt's downloads and updates against the machine's real Debian mirror (setup's bullseye lists).

setup's kernel step downloads two source packages into one cache directory at once (the 5.10.223 tree beside
Debian's newest kernel source); download picked "the .deb that appeared in the directory", so the second one took
the first one's package and failed to extract its tarball (a fresh root, 2026-12-07). Here another writer drops
foreign .deb files into the same directory for the whole download, as the other download would. The same fresh
root then failed in the test suite's setup: apt keeps the lists compressed where the machine's apt config says so
(Acquire::GzipIndexes: ..._Packages.lz4), ensure_updated did not see them and ran apt-get update on every call,
and two of those at once collided on apt's own lock."""

from __future__ import annotations

import subprocess
import threading

import pytest

from numaforge import debian_apt

pytestmark = pytest.mark.kernel_source

PACKAGE = "hello"  # a small package in bullseye main (about 60 KB)


def test_a_download_returns_its_own_package_while_another_lands_beside_it(tmp_path):
    stop = threading.Event()
    foreign: list[str] = []

    def other_download():
        i = 0
        while not stop.is_set():
            name = f"aaa-other_{i}_all.deb"  # sorts before hello_*: what the old pick took first
            (tmp_path / name).write_bytes(b"not ours")
            foreign.append(name)
            i += 1
            stop.wait(0.005)

    t = threading.Thread(target=other_download)
    t.start()
    try:
        deb = debian_apt.download("bullseye", PACKAGE, tmp_path)
    finally:
        stop.set()
        t.join()
    assert deb.parent == tmp_path and deb.name.startswith(f"{PACKAGE}_") and deb.suffix == ".deb", deb
    field = subprocess.run(["dpkg-deb", "-f", str(deb), "Package"], capture_output=True, text=True, check=True)
    assert field.stdout.strip() == PACKAGE
    assert foreign and all((tmp_path / n).read_bytes() == b"not ours" for n in foreign)
    # nothing of the download is left beside it: no private directory, no partial file
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([deb.name, *foreign])


def test_a_package_apt_does_not_know_is_an_error_that_names_it(tmp_path):
    with pytest.raises(debian_apt.NumaforgeError, match="no-such-package-numaforge") as e:
        debian_apt.download("bullseye", "no-such-package-numaforge", tmp_path)
    assert "debian_apt update bullseye" in (e.value.fix or "")
    assert list(tmp_path.iterdir()) == []


def test_lists_are_seen_however_apt_compressed_them(tmp_path):
    assert not debian_apt.have_lists(tmp_path)
    (tmp_path / "lock").touch()
    (tmp_path / "deb.debian.org_debian_dists_bullseye_InRelease").touch()
    assert not debian_apt.have_lists(tmp_path)  # a Release file is not a package list
    for name in ("main_binary-amd64_Packages.lz4", "main_source_Sources.gz", "main_binary-amd64_Packages"):
        f = tmp_path / f"deb.debian.org_debian_dists_bullseye_{name}"
        f.touch()
        assert debian_apt.have_lists(tmp_path), name
        f.unlink()


def test_the_machines_lists_are_seen_so_no_call_updates_them_again():
    """setup's bullseye lists (this machine's apt config decides their compression): ensure_updated finds them."""
    lists = debian_apt._root("bullseye") / "lists"
    assert debian_apt.have_lists(lists), sorted(p.name for p in lists.iterdir())


def test_two_updates_at_once_both_succeed():
    """apt-get refuses a second update of the same lists while one runs; numaforge's updates wait for each other."""
    errors: list[BaseException] = []

    def one():
        try:
            debian_apt.update("bullseye")
        except BaseException as exc:  # reported below, with the other thread's
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert debian_apt.have_lists(debian_apt._root("bullseye") / "lists")
