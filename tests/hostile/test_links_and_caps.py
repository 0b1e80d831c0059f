"""Files, links and size caps on the build server (issue 40 items 4 and 2): numaforge never creates or truncates a
file through a symbolic link (locks, journals, --json/--junit reports, state files), a lock directory that is a
dangling link or a file is a clear error (not "a bug"), a lock-holder record is read and printed bounded, and
`--root` naming a missing directory or a file is a usage error. docs/RELIABILITY.md lists each promise."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from numaforge import hostlock, journal, safeio
from numaforge.errors import NumaforgeError

pytestmark = pytest.mark.hostile

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "numaforge"


# ------------------------------------------------------------------------------------------------ --root
@pytest.mark.parametrize("kind", ["missing", "file"])
def test_root_naming_a_missing_directory_or_a_file_is_exit_2_without_a_traceback(tmp_path, kind):
    """`numaforge --root /nonexistent` and `--root /etc/passwd` printed an uncaught ProjectError traceback."""
    target = tmp_path / "nothing-here"
    if kind == "file":
        target.write_text("root:x:0:0::/root:/bin/sh\n")
    r = subprocess.run(
        [sys.executable, "-c", "from numaforge.cli.main import main; main()", "--root", str(target), "--list"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    said = "is not a directory (it is a file)" if kind == "file" else "does not exist"
    assert f"error: --root: project directory {target} {said}" in r.stderr and "fix:" in r.stderr


# ------------------------------------------------------------------------------------------------ locks
def test_a_symlink_planted_at_a_lock_file_is_refused_and_its_target_kept(tmp_path, monkeypatch):
    """A link at <state>/locks/<host>.lock made bios-apply truncate the link's target to 0 bytes."""
    monkeypatch.setenv("NUMAFORGE_STATE", str(tmp_path / "state"))
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    path = hostlock.lock_path("gpu-01")
    path.symlink_to(victim)
    with pytest.raises(NumaforgeError) as exc:
        with hostlock.held("gpu-01", "bios-apply"):
            pass
    assert victim.read_text() == "keep me\n"
    assert "symbolic link" in exc.value.what and str(path) in exc.value.render()
    assert f"rm {path}" in (exc.value.fix or "")
    assert exc.value.exit_code == 2


@pytest.mark.parametrize("kind", ["dangling-link", "file", "link-to-file"])
def test_a_lock_directory_that_is_not_a_directory_is_a_clear_error(tmp_path, monkeypatch, kind):
    """A dangling link or a file at <state>/locks gave a raw FileExistsError / NotADirectoryError ("a bug")."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("NUMAFORGE_STATE", str(state))
    locks = state / "locks"
    if kind == "dangling-link":
        locks.symlink_to(tmp_path / "gone")
    elif kind == "file":
        locks.write_text("x")
    else:
        (tmp_path / "f").write_text("x")
        locks.symlink_to(tmp_path / "f")
    with pytest.raises(NumaforgeError) as exc:
        with hostlock.held("gpu-01", "bios-apply"):
            pass
    assert str(locks) in exc.value.render() and exc.value.fix and exc.value.exit_code == 2
    assert not (tmp_path / "gone").exists()  # a dangling link is not followed to create its target


def test_a_huge_lock_holder_record_is_read_bounded_and_printed_escaped(tmp_path, monkeypatch):
    """A 100 MB holder record was read whole and printed whole; control codes in it reached the terminal."""
    monkeypatch.setenv("NUMAFORGE_STATE", str(tmp_path / "state"))
    path = hostlock.lock_path("gpu-01")
    big = {"pid": 1, "task": "\x1b[2J" + "A" * (50 * 1024 * 1024), "user": "u", "started": "s"}
    path.write_text(json.dumps(big))
    who = hostlock.holder(path)
    text = hostlock.describe(who)
    assert len(text) <= 2 * hostlock.MAX_SHOWN + 200, len(text)
    assert "\x1b" not in text
    assert len(hostlock.read_record(path)) == hostlock.MAX_RECORD_BYTES + 1  # enough to tell it is longer
    assert f"over {hostlock.MAX_RECORD_BYTES} bytes" in text


def test_a_lock_holder_record_with_control_codes_is_escaped(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMAFORGE_STATE", str(tmp_path / "state"))
    path = hostlock.lock_path("gpu-01")
    path.write_text(json.dumps({"pid": "1\x1b]0;owned\x07", "task": "t\rX", "user": "u", "started": "s"}))
    text = hostlock.describe(hostlock.holder(path))
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text and "\\x1b" in text


# ------------------------------------------------------------------------------------------------ journal
def test_a_journal_that_is_a_symlink_is_not_written_through(tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    jdir = tmp_path / "j"
    jdir.mkdir()
    j = journal.open("bios-apply x", jdir)
    j.record("h1", journal.PATCHED)
    path = journal.path_for("bios-apply x", jdir)
    path.unlink()
    path.symlink_to(victim)
    with pytest.raises(journal.JournalError) as exc:
        j.record("h1", journal.REBOOT_REQUESTED)
    assert "symbolic link" in exc.value.what and victim.read_text() == "keep me\n"


# ------------------------------------------------------------------------------------------------ reports
@pytest.mark.parametrize("dangling", [False, True])
@pytest.mark.parametrize("option", ["--json", "--junit"])
def test_a_report_path_that_is_a_symlink_is_refused_before_any_work(tmp_path, option, dangling):
    """--json/--junit wrote through a symlink (dangling or not) to its target."""
    victim = tmp_path / "precious.txt"
    if not dangling:
        victim.write_text("keep me\n")
    link = tmp_path / "report.out"
    link.symlink_to(victim)
    with pytest.raises(safeio.OutputPathError) as exc:
        safeio.check_output(link, option)
    assert "symbolic link" in exc.value.what and exc.value.where == option and str(link) in exc.value.what
    with pytest.raises(safeio.OutputPathError):
        safeio.write_output(link, "new\n", option)
    assert link.is_symlink()
    assert (victim.read_text() == "keep me\n") if not dangling else not victim.exists()


def test_a_report_path_through_a_symlink_to_a_directory_is_still_written(tmp_path):
    """Only the file itself must not be a link: a linked parent directory (e.g. /tmp -> /private/tmp) is fine."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "d").symlink_to(real)
    safeio.write_output(tmp_path / "d" / "r.json", "x\n")
    assert (real / "r.json").read_text() == "x\n"


def test_invoke_json_to_a_symlink_exits_2_and_leaves_the_target(tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "r.json"
    link.symlink_to(victim)
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  h1:\n    bmc: {url: 'https://bmc.example', username: admin, password: 'env:NF_X_PW'}\n")
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(ROOT), "inventory-check", "--inventory", str(inv)]
        + ["--syntax-only", "--json", str(link)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NF_X_PW": "x-pw", "COLUMNS": "200"},
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "symbolic link" in r.stderr and victim.read_text() == "keep me\n"


# ------------------------------------------------------------------------------------------------ the scan
# Every raw file writer in numaforge/ outside numaforge/safeio.py, by module and function, with why it may
# bypass safeio. A new writer (open(..., "w"/"a"/"x"/"+"), write_text/write_bytes, os.open, tempfile.mkstemp,
# shutil.copy*) that is not listed fails test_every_raw_file_writer_is_listed; an entry whose writer is gone
# fails too, so the list stays the real one.
BUILD_TREE = "a build output inside numaforge's own build/cache tree (paths.build_dir/cache_dir), not user-named"
LAB = "the lab simulator's own state dir (numaforge/lab), created by the lab, never a user-named path"
ALLOWED_RAW_WRITERS = {
    ("numaforge/paths.py", "atomic_write_text"): "mkstemp (O_EXCL) + rename: replaces a link, never follows it",
    ("numaforge/journal.py", "Journal._rewrite"): "mkstemp (O_EXCL) + rename + directory fsync",
    ("numaforge/livepatch/lifecycle.py", "_put_text"): "a NamedTemporaryFile (O_EXCL) uploaded, then removed",
    ("numaforge/remote/hostkeys.py", "StrictPolicy.missing_host_key"): "appends to the user's own known_hosts, "
    "like OpenSSH (which follows a link there: dotfile managers link it)",
    ("numaforge/doctor.py", "kvm_usable"): "opens /dev/kvm read-write to probe it; never creates or truncates",
    ("numaforge/cli/common.py", "_output_gone"): "opens /dev/null to stand in for a closed stdout/stderr",
    ("numaforge/bios/capture.py", "write_tree"): "writes inside a fresh mkdtemp directory (0700, this run's alone: "
    "no link can be planted there), renamed into place whole",
    ("numaforge/debian_apt.py", "apt_options"): BUILD_TREE,
    ("numaforge/filelock.py", "locked"): BUILD_TREE + " (every caller locks a file of its cache or build dir)",
    ("numaforge/debian_apt.py", "extract_member"): BUILD_TREE,
    ("numaforge/kernel/backport.py", "apply_series"): BUILD_TREE,
    ("numaforge/kernel/backport.py", "check_applies_to_base"): BUILD_TREE,
    ("numaforge/kernel/compile.py", "_check"): BUILD_TREE,
    ("numaforge/kernel/compile.py", "_configure"): BUILD_TREE,
    ("numaforge/kernel/kpatch.py", "_Logs.start"): BUILD_TREE,
    ("numaforge/kernel/kpatch.py", "_kpatch_build"): BUILD_TREE,
    ("numaforge/kernel/kpatch.py", "_reuse"): BUILD_TREE,
    ("numaforge/kernel/kpatch.py", "_write_manifest"): BUILD_TREE,
    ("numaforge/kernel/kpatch_inputs.py", "debian_tree"): BUILD_TREE,
    ("numaforge/kernel/kpatch_steps.py", "run_kpatch_build"): BUILD_TREE,
    ("numaforge/kernel/labkernel.py", "_build"): BUILD_TREE,
    ("numaforge/kernel/labkernel.py", "_build_incremental"): BUILD_TREE,
    ("numaforge/kernel/labkernel.py", "_finish"): BUILD_TREE,
    ("numaforge/kernel/labkernel.py", "_relocate_tools"): BUILD_TREE,
    ("numaforge/kernel/labkernel.py", "_prepare"): BUILD_TREE,
    ("numaforge/kernel/source.py", "_debian_tarball"): BUILD_TREE,
    ("numaforge/kernel/source.py", "_import_tarball"): BUILD_TREE,
    ("numaforge/kernel/targets.py", "debian_inputs"): BUILD_TREE,
    ("numaforge/kernel/toolchain.py", "compiler_shim"): BUILD_TREE,
    ("numaforge/kernel/toolchain.py", "gcc_comment"): BUILD_TREE,
    ("numaforge/lab/bmc/__main__.py", "main"): LAB,
    ("numaforge/lab/bmc/__main__.py", "fleet_main"): LAB,
    ("numaforge/lab/bmc/corpus.py", "main"): "the registry corpus build (a developer's command, python -m "
    "numaforge.lab.bmc.corpus) writing the package's own data directory",
    ("numaforge/lab/bmc/fleet.py", "state_password"): LAB,
    ("numaforge/lab/bmc/mockup.py", "MockupSimulator._save"): LAB,
    ("numaforge/lab/bmc/server.py", "BMCSimulator.__init__"): LAB,
    ("numaforge/lab/bmc/state.py", "BMCState.save"): LAB,
    ("numaforge/lab/bmc/tls.py", "_write_private"): LAB,
    ("numaforge/lab/bmc/tls.py", "_write_public"): LAB,
    ("numaforge/lab/initramfs.py", "build"): LAB,
    ("numaforge/lab/kernels.py", "build_module"): LAB,
    ("numaforge/lab/kernels.py", "debian_kernel"): LAB,
    ("numaforge/lab/services.py", "bmc_up"): LAB,
    ("numaforge/lab/vm.py", "ensure_keys"): LAB,
    ("numaforge/lab/vm.py", "ensure_persist_disk"): LAB,
    ("numaforge/lab/vm.py", "up"): LAB,
}


def _raw_writers() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel == "numaforge/safeio.py" or "/dmtf/" in rel:
            continue
        tree = ast.parse(path.read_text(), rel)

        _visit(tree, [], rel, found)
    return found


def _visit(node: ast.AST, scope: list[str], rel: str, found: set[tuple[str, str]]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            _visit(child, scope + [child.name], rel, found)
            continue
        if isinstance(child, ast.Call) and _writes(child):
            found.add((rel, ".".join(scope) or "<module>"))
        _visit(child, scope, rel, found)


def _writes(call: ast.Call) -> bool:
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
    if name in ("write_text", "write_bytes", "mkstemp", "NamedTemporaryFile") or (
        owner == "shutil" and name.startswith("copy")
    ):
        return True
    if owner == "os" and name == "open":  # a read-only open (O_RDONLY alone) creates and truncates nothing
        flags = (
            {n.attr for n in ast.walk(call.args[1]) if isinstance(n, ast.Attribute)} if len(call.args) > 1 else set()
        )
        return bool(flags & {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"}) or not flags
    if name == "open" and owner in ("", "io", "builtins"):
        mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
        return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wax+")
    return False


def test_every_raw_file_writer_is_listed():
    found = _raw_writers()

    # nested function scopes are reported with their enclosing names: match an entry by its prefix
    def listed(w):
        return any(w[0] == m and (w[1] == f or w[1].startswith(f + ".")) for m, f in ALLOWED_RAW_WRITERS)

    new = sorted(w for w in found if not listed(w))
    assert not new, f"raw file writers that bypass numaforge.safeio (use safeio's helpers, or list them): {new}"
    stale = sorted(
        k
        for k in ALLOWED_RAW_WRITERS
        if not any(w[0] == k[0] and w[1].split(".")[: len(k[1].split("."))] == k[1].split(".") for w in found)
    )
    assert not stale, f"listed writers no longer in the code (remove them from the list): {stale}"
    print(f"{len(found)} raw writers outside safeio, all listed")


@pytest.mark.parametrize("kind", ["dangling-link", "file"])
def test_facts_save_into_a_path_that_is_not_a_directory_is_a_clear_error(tmp_path, kind):
    from numaforge.facts.captures import CaptureError, Captures

    d = tmp_path / "caps"
    if kind == "file":
        d.write_text("x")
    else:
        d.symlink_to(tmp_path / "gone")
    with pytest.raises(CaptureError) as exc:
        Captures(source="h", files={"uname_-r.txt": "5.10.0\n"}).save(d)
    assert str(d) in exc.value.render() and exc.value.exit_code == 2 and not (tmp_path / "gone").exists()


@pytest.mark.bmc
def test_bios_apply_with_a_symlink_at_the_host_lock_writes_nothing_and_keeps_the_target(tmp_path, monkeypatch):
    """The reported case end to end: a real `invoke bios-apply --reboot` against the BMC simulator (TLS) with a
    link planted at the host's lock file. It truncated the link's target to 0 bytes; now the host fails naming
    the link, no PATCH or reset reaches the BMC, and the target keeps its content."""
    from types import SimpleNamespace

    from numaforge.lab.bmc import BMCSimulator

    password = "Lab-" + os.urandom(4).hex()
    sim = BMCSimulator(flavour="generic", tls=True, username="admin", password=password, power_delay=1.0).start()
    try:
        inv = tmp_path / "inv.yaml"
        inv.write_text(
            "hosts:\n  gpu-01:\n"
            f"    bmc: {{url: '{sim.url}', username: admin, password: 'env:NF_LINK_PW', ca_bundle: '{sim.ca_file}'}}\n"
            "    hardware: {sockets: 2, gpus: ['0000:41:00.0']}\n    bios_profile: epyc-gpudirect\n"
        )
        state = tmp_path / "state"
        monkeypatch.setenv("NUMAFORGE_STATE", str(state))
        (key,) = hostlock.machine_keys(SimpleNamespace(bmc=SimpleNamespace(url=sim.url)))
        victim = tmp_path / "precious.txt"
        victim.write_text("keep me\n")
        lock = hostlock.lock_path(key)
        lock.symlink_to(victim)
        r = subprocess.run(
            [sys.executable, "-m", "invoke", "-r", str(ROOT), "bios-apply", "-i", str(inv), "--reboot"]
            + ["--json", str(tmp_path / "r.json")],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "NF_LINK_PW": password, "NUMAFORGE_STATE": str(state), "COLUMNS": "300"},
        )
        out = " ".join((r.stdout + r.stderr).split())
        assert r.returncode != 0, out
        assert victim.read_text() == "keep me\n" and lock.is_symlink()
        assert sim.count("PATCH") == 0 and sim.count("POST", "Reset") == 0
        (host,) = json.loads((tmp_path / "r.json").read_text())["hosts"]
        assert host["status"] == "failed" and "symbolic link" in host["message"] and "a bug" not in host["message"]
    finally:
        sim.stop()
