"""Process start (issue 18): a task imports only what it uses.

`invoke --list`, `invoke TASK --help` and `import tasks` must not import any pipeline or its libraries
(gitpython, paramiko, requests/redfish, jsonschema, jinja2); `invoke bios-plan` imports the firmware pipeline
only (tests/bios/test_startup_bmc.py runs it against a simulator BMC). numaforge.lazy is the mechanism.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from numaforge.lazy import LazyModule, lazy_module

ROOT = Path(__file__).parents[1]

# what no task listing or help may import: pipelines, transports and the heavy libraries behind them
HEAVY = (
    "git",
    "paramiko",
    "requests",
    "redfish",
    "jsonschema",
    "jinja2",
    "numaforge.kernel.backport",
    "numaforge.kernel.source",
    "numaforge.kernel.kpatch",
    "numaforge.bios.apply",
    "numaforge.bios.profile",
    "numaforge.bios.vendors",
    "numaforge.bios.verify",
    "numaforge.hostos.run",
    "numaforge.audit",
    "numaforge.livepatch",
    "numaforge.facts",
    "numaforge.remote.ssh",
    "numaforge.measure.runner",
    "numaforge.lab.vm",
    "numaforge.inventory.loader",
    "numaforge.doctor",
)


# run ARGV (a module as with -m, or -c CODE) in a fresh interpreter and write its sys.modules at exit: what it
# imported, however (importtime misses modules imported through importlib.import_module, as numaforge.lazy does)
PROBE = """
import atexit, json, os, runpy, sys
atexit.register(lambda: open(os.environ["NF_MODULES_OUT"], "w").write(json.dumps(sorted(sys.modules))))
what, sys.argv = sys.argv[1], sys.argv[1:]
if what == "-c":
    sys.argv = sys.argv[1:]
    exec(compile(sys.argv[0], "<probe>", "exec"), {"__name__": "__main__"})
else:
    runpy.run_module(what, run_name="__main__", alter_sys=True)
"""


def imported_by(*argv: str, env: dict | None = None, tmp: Path) -> set[str]:
    """The modules `python -m ARGV...` (or `python -c CODE`) imported; it must exit 0."""
    out = tmp / "modules.json"
    r = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "250", "NF_MODULES_OUT": str(out), **(env or {})},
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    mods = set(json.loads(out.read_text()))
    assert "numaforge.cli.main" in mods, "the probe did not run the task surface"
    return mods


def heavy_in(mods: set[str], heavy=HEAVY) -> list[str]:
    return sorted(m for m in mods if any(m == h or m.startswith(h + ".") for h in heavy))


@pytest.mark.parametrize(
    "args",
    [
        ("-c", "import tasks"),
        ("invoke", "--list"),
        ("invoke", "bios-plan", "--help"),
        ("invoke", "backport", "--help"),
        ("invoke", "os-apply", "--help"),
        ("invoke", "numa-audit", "--help"),
        ("-c", "import sys; from numaforge.cli.main import main; sys.argv = ['numaforge', '--list']; main()"),
    ],
    ids=[
        "import tasks",
        "invoke --list",
        "bios-plan --help",
        "backport --help",
        "os-apply --help",
        "numa-audit --help",
        "numaforge --list",
    ],
)
def test_listing_and_help_import_no_pipeline(args, tmp_path):
    mods = imported_by(*args, tmp=tmp_path)
    assert heavy_in(mods) == []


# what the BIOS tasks never need
NOT_FOR_BIOS = (
    "git",
    "paramiko",
    "numaforge.kernel",
    "numaforge.livepatch",
    "numaforge.hostos",
    "numaforge.remote",
    "numaforge.facts",
    "numaforge.measure",
    "numaforge.lab.vm",
    "numaforge.doctor",
)
BMC_PASSWORD = "startup-Bmc-pw-3"


@pytest.fixture
def bmc_inventory(tmp_path):
    from numaforge.lab.bmc import BMCSimulator

    sim = BMCSimulator(flavour="dell", tls=True, username="admin", password=BMC_PASSWORD).start()
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "version: 1\nhosts:\n  gpu-dell:\n"
        f"    bmc: {{url: '{sim.url}', username: admin, password: 'env:NF_STARTUP_PW', ca_bundle: '{sim.ca_file}'}}\n"
        "    hardware: {sockets: 2, gpus: ['0000:41:00.0']}\n"
        "    bios_profile: epyc-gpudirect\n"
        "    vars: {bios_unverified: allow}\n"  # it writes: unverified values are refused by default (issue 39)
    )
    yield inv
    sim.stop()


@pytest.mark.bmc
@pytest.mark.parametrize("task", ["bios-plan", "bios-apply"])
def test_bios_tasks_import_only_the_firmware_pipeline(bmc_inventory, task, tmp_path):
    """The task runs against a simulator BMC (exit 0) and imports the firmware pipeline and its libraries only."""
    mods = imported_by(
        "invoke",
        task,
        "-i",
        str(bmc_inventory),
        "--json",
        str(tmp_path / "r.json"),
        env={"NF_STARTUP_PW": BMC_PASSWORD},
        tmp=tmp_path,
    )
    assert json.loads((tmp_path / "r.json").read_text())["hosts"][0]["status"] in ("unchanged", "changed")
    assert {"numaforge.bios.apply", "requests", "redfish", "jsonschema"} <= mods  # it ran the pipeline
    assert heavy_in(mods, NOT_FOR_BIOS) == []


def test_help_shows_defaults_from_the_light_module():
    """The defaults moved to numaforge.defaults are the ones the pipelines use and --help shows."""
    from numaforge import defaults
    from numaforge.hostos import run as hostos_run
    from numaforge.kernel import backport, source

    assert source.DEFAULT_DEBIAN == defaults.DEFAULT_DEBIAN
    assert backport.DEFAULT_SERIES == defaults.DEFAULT_SERIES
    assert hostos_run.OsOptions().gate_threshold == defaults.DEFAULT_GATE_THRESHOLD
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "backport", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
        timeout=120,
    )
    assert defaults.DEFAULT_DEBIAN in r.stdout and defaults.DEFAULT_SERIES in r.stdout


def test_every_lazy_module_of_the_task_surface_imports():
    """A misspelt lazy_module name would only fail when its task runs: resolve every one here."""
    import numaforge.cli.main as main
    import numaforge.report

    main.namespace()  # imports every numaforge/cli module
    found = []
    for name, mod in sorted(sys.modules.items()):
        if name.startswith("numaforge.cli.") or mod is numaforge.report:
            for attr, value in vars(mod).items():
                if isinstance(value, LazyModule):
                    found.append(f"{name}.{attr}")
                    assert value._lazy_load().__name__ == value._lazy_name
    assert "numaforge.cli.bios.bapply" in found and "numaforge.report.jsonschema" in found


def test_lazy_module_imports_on_first_use_and_delegates(tmp_path, monkeypatch):
    (tmp_path / "nf_lazy_probe.py").write_text("VALUE = 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "nf_lazy_probe", raising=False)
    proxy = lazy_module("nf_lazy_probe")
    assert "nf_lazy_probe" not in sys.modules
    assert "not imported yet" in repr(proxy)
    assert proxy.VALUE == 41
    assert sys.modules["nf_lazy_probe"].VALUE == 41
    proxy.VALUE = 42  # setting through the proxy sets the module's attribute (what monkeypatch does)
    assert sys.modules["nf_lazy_probe"].VALUE == 42
    with pytest.raises(AttributeError):
        proxy.MISSING  # noqa: B018
    missing = lazy_module("nf_lazy_probe_does_not_exist")
    with pytest.raises(ModuleNotFoundError):
        missing.anything  # noqa: B018


def test_lazy_module_is_thread_safe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many threads touch an unimported module at once: each sees it fully executed, and it runs once
    (importlib.util.LazyLoader, not thread-safe on Python 3.11, would hand some of them a half-made module)."""
    runs = tmp_path / "runs"
    (tmp_path / "nf_lazy_slow.py").write_text(
        "import time\n"
        f"with open({str(runs)!r}, 'a') as f:\n"
        "    f.write('run\\n')\n"
        "EARLY = 1\n"
        "time.sleep(0.3)\n"
        "LATE = 2\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "nf_lazy_slow", raising=False)
    proxy = lazy_module("nf_lazy_slow")
    n = 24
    barrier = threading.Barrier(n)
    seen: list = []
    errors: list = []

    def touch():
        barrier.wait()
        try:
            seen.append(proxy.LATE)
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=touch) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert seen == [2] * n
    assert runs.read_text() == "run\n"
