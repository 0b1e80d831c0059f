"""`doctor --strict` (issue 24): the suite's tools come from setup's one list (scripts/packages.txt), each command
from its Debian package and not a copy installed by hand, every kpatch target's compiler and wrapper listed, the
venv holding only numaforge[test]'s requirements. Real dpkg data of this machine, real PATH lookups."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from numaforge import doctor
from numaforge.errors import NumaforgeError
from numaforge.kernel import targets
from numaforge.paths import ROOT

PACKAGES = ROOT / "scripts" / "packages.txt"


def test_the_shipped_list_parses_and_names_every_target_tool():
    reqs = doctor.parse_packages(PACKAGES.read_text(), str(PACKAGES))
    declared = {c for r in reqs for c in r.commands}
    assert {"ccache", "gcc-10", "kpatch-build", "qemu-system-x86_64", "sshd", "ip"} <= declared
    for name in targets.available():
        t = targets.load_target(name)
        assert t.compiler in declared and (t.cc_wrapper is None or t.cc_wrapper in declared), name
    assert all(r.where.startswith(f"{PACKAGES}:") for r in reqs)


def test_every_setup_step_installs_from_the_list():
    """No apt package list hides in a setup script: what setup installs is what doctor --strict checks."""
    for script in [ROOT / "scripts" / "setup.sh", *sorted((ROOT / "scripts" / "setup.d").glob("*.sh"))]:
        for no, line in enumerate(script.read_text().splitlines(), 1):
            if re.match(r"\s*apt_need\s", line):
                words = line.split()[1:]
                assert words and all(w.startswith("$(packages") or w.endswith(")") for w in words), (
                    f"{script.name}:{no}: apt_need with packages outside scripts/packages.txt: {line.strip()}"
                )


def test_bad_lines_are_all_reported_with_file_and_line():
    text = "# c\nbase apt git git\nbase pip requests -\nssh apt\nkernel apt bc bc\n"
    with pytest.raises(NumaforgeError) as exc:
        doctor.parse_packages(text, "p.txt")
    e = exc.value
    assert e.exit_code == 2 and "2 bad line(s)" in e.what and "p.txt:3" in e.what and "p.txt:4" in e.what
    assert e.where == "p.txt:3" and "SOURCE one of apt, bullseye, built, cached" in e.fix
    (r,) = doctor.parse_packages("kernel apt bc bc,dc\n", "p.txt")
    assert (r.tier, r.source, r.package, r.commands, r.where) == ("kernel", "apt", "bc", ("bc", "dc"), "p.txt:1")


def test_merged_usr_names_count_as_the_package_file():
    assert doctor.command_owner_ok("/usr/bin/tar", {"/bin/tar"})
    assert doctor.command_owner_ok("/sbin/ip", {"/usr/sbin/ip"})
    assert not doctor.command_owner_ok("/usr/local/bin/tar", {"/bin/tar", "/usr/bin/tar"})


@pytest.mark.skipif(not shutil.which("dpkg-query"), reason="needs dpkg (Debian)")
def test_a_copy_installed_by_hand_is_caught(tmp_path, monkeypatch):
    """git from Debian's package passes; the same name first on PATH from elsewhere fails, naming the path;
    a package that is not installed fails with setup's fix and the list's file:line."""
    reqs = doctor.parse_packages(
        "base apt git git\nkpatch apt no-such-package-numaforge nosuchcmd\n", "scripts/packages.txt"
    )
    installed = doctor._dpkg_installed()
    ok, missing = doctor._requirement_checks(reqs, installed)
    assert ok.ok and not missing.ok and "is not installed" in missing.detail
    assert "bash scripts/setup.sh" in missing.fix and "scripts/packages.txt:2" in missing.fix
    fake = tmp_path / "git"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{'/usr/bin:/bin'}")
    (hand, _) = doctor._requirement_checks(reqs, installed)
    assert not hand.ok and f"git at {fake} is not git's (installed by hand?" in hand.detail


def test_a_target_wrapper_setup_does_not_install_fails(tmp_path, monkeypatch):
    reqs = doctor.parse_packages("kernel bullseye gcc-10 gcc-10\n", "p.txt")
    rows = {r.name: r for r in doctor._target_checks(reqs)}
    for name in ("target:debian-5.10.0-46-amd64", "target:lab"):  # both build through ccache
        row = rows[name]
        assert not row.ok and "ccache not installed by setup" in row.detail and "add ccache to" in row.fix
    reqs += doctor.parse_packages("kpatch apt ccache ccache\n", "p.txt")
    assert all(r.ok for r in doctor._target_checks(reqs))


def test_the_venv_closure_follows_extras_and_markers():
    need = doctor._requires_closure([("numaforge", {"test"})])
    assert {"pytest", "paramiko", "redfish", "mypy", "jinja2", "markupsafe"} <= need
    assert "ansible-core" not in need and "numaforge" in need
    assert "ansible-core" in doctor._requires_closure([("ansible", set())])


def test_strict_cli_refuses_a_pipeline_and_reports_every_row(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "doctor", "--strict", "--pipeline", "kernel"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "--strict checks every pipeline" in r.stderr
