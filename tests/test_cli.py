"""The task surface, run as users run it: `invoke ...` in a subprocess from the project root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from numaforge.lab.bmc.tls import ensure_certificates
from numaforge.report import load_schema

ROOT = Path(__file__).parents[1]
BAD = ROOT / "tests" / "data" / "inventory" / "bad"


def invoke(*args, env=None, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        timeout=120,
    )


def test_every_task_and_option_is_documented():
    sys.path.insert(0, str(ROOT))
    try:
        import tasks
    finally:
        sys.path.pop(0)
    names = set(tasks.ns.task_names)
    assert {"inventory-check", "doctor"} <= names
    for name in names:
        t = tasks.ns[name]
        assert (t.__doc__ or "").strip(), f"task {name} has no help line"
        for arg in t.get_arguments():
            assert arg.help, f"task {name}: option --{arg.name} has no help text"
    listed = invoke("--list").stdout
    for name in names:
        assert name in listed


def test_inventory_check_prints_resolved_hosts_and_masks_secrets(tmp_path):
    r = invoke(
        "inventory-check",
        "--inventory",
        "inventory/example-fleet.yaml",
        "--group",
        "hpe-dl385",
        "--syntax-only",
        "--json",
        str(tmp_path / "r.json"),
    )
    assert r.returncode == 0, r.stderr
    assert "\ngpu-dl385-01  (inventory/example-fleet.yaml:30)" in r.stdout
    assert "\ngpu-r7525-01  (" not in r.stdout, "only the selected host is shown"
    assert "1 of 3 hosts selected" in r.stdout
    assert "password=env:NUMAFORGE_BMC_PASSWORD" in r.stdout
    doc = json.loads((tmp_path / "r.json").read_text())
    jsonschema.validate(doc, load_schema())
    assert doc["ok"] is True and [h["host"] for h in doc["hosts"]] == ["gpu-dl385-01"]
    assert doc["hosts"][0]["data"]["vars"] == {"site": "fra1", "gpus_per_node": 1}


def test_inventory_check_preflight_lists_every_missing_reference(tmp_path):
    """Issue 16 item 7: key files, known_hosts, CA bundles, file: secrets and env: variables are checked; every
    problem is listed with host/attribute; no value is ever printed."""
    (tmp_path / "bmc.pass").write_text("Sup3rS3cret\n")
    (tmp_path / "bmc.pass").chmod(0o644)  # readable by others: a problem (issue 12 item 8)
    (tmp_path / "id_fleet").write_text("key\n")
    (tmp_path / "id_fleet").chmod(0o600)  # a key others can read is a problem too (issue 25 item 4)
    (tmp_path / "empty.pass").write_text("")
    (tmp_path / "empty.pass").chmod(0o600)
    (tmp_path / "ca").mkdir()
    inv = tmp_path / "hosts.ini"
    inv.write_text(
        "[gpu]\n"
        "g1 ansible_ssh_private_key_file=missing_key numaforge_bmc_url=https://bmc1 numaforge_bmc_ca_bundle=ca "
        "numaforge_bmc_password=env:NF_PREFLIGHT_UNSET\n"
        "g2 ansible_ssh_private_key_file=id_fleet numaforge_bmc_url=https://bmc2 "
        "numaforge_bmc_password=file:bmc.pass\n"
        "g3 numaforge_bmc_url=https://bmc3 numaforge_bmc_password=file:empty.pass\n"
        "[gpu:vars]\nnumaforge_ssh_known_hosts=/nonexistent/known_hosts\n"
    )
    env = {"NF_PREFLIGHT_SET": "Env5ecretValue"}
    r = invoke("inventory-check", "--inventory", str(inv), "--json", str(tmp_path / "r.json"), env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    for host, attr in (
        ("g1", "ssh.key_file"),
        ("g1", "bmc.ca_bundle"),
        ("g1", "bmc.password"),
        ("g1", "ssh.known_hosts"),
        ("g2", "ssh.known_hosts"),
        ("g3", "ssh.known_hosts"),
        ("g3", "bmc.password"),
        ("g2", "bmc.password"),
    ):
        assert f"{host}: {attr}:" in out, (host, attr, out)
    assert "g2: ssh.key_file" not in out and "is readable by others" in out and "chmod 600" in out
    assert "environment variable NF_PREFLIGHT_UNSET is not set" in out and "is empty" in out
    assert "8 problem(s)" in out and "Traceback" not in out
    report = (tmp_path / "r.json").read_text()
    doc = json.loads(report)
    jsonschema.validate(doc, load_schema())
    assert doc["ok"] is False and {h["host"]: h["status"] for h in doc["hosts"]} == {
        "g1": "failed",
        "g2": "failed",
        "g3": "failed",
    }
    assert "Sup3rS3cret" not in out + report
    # everything present: ok, and the secret file's value and env values are still never printed
    (tmp_path / "missing_key").write_text("key\n")
    (tmp_path / "missing_key").chmod(0o600)
    (tmp_path / "empty.pass").write_text("An0therSecret\n")
    (tmp_path / "bmc.pass").chmod(0o600)
    (tmp_path / "ca.pem").write_bytes(ensure_certificates(tmp_path / "tls", "bmc1")[0].read_bytes())  # a real CA
    (tmp_path / "known_hosts").write_text("")
    inv.write_text(
        inv.read_text()
        .replace("ca_bundle=ca ", "ca_bundle=ca.pem ")
        .replace("NF_PREFLIGHT_UNSET", "NF_PREFLIGHT_SET")
        .replace("/nonexistent/known_hosts", str(tmp_path / "known_hosts"))
    )
    r = invoke("inventory-check", "--inventory", str(inv), env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every file and environment variable referenced by 3 host(s) is present" in r.stdout
    assert not {"Sup3rS3cret", "An0therSecret", "Env5ecretValue"} & set((r.stdout + r.stderr).split())


def test_inventory_text_is_printed_as_data(tmp_path):
    """Rich markup or emoji codes in inventory values are shown verbatim (was: MarkupError traceback)."""
    inv = tmp_path / "hosts.ini"
    inv.write_text('[gpu]\ng1 note="[/b] [red]x :smile: 0000:41:00.0"\n')
    r = invoke("inventory-check", "--inventory", str(inv), "--syntax-only")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "note='[/b] [red]x :smile: 0000:41:00.0'" in r.stdout


def test_plaintext_secret_masked_everywhere(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  h:\n    bmc: {url: 'https://b.example', password: Sup3rS3cret}\n")
    refused = invoke("inventory-check", "--inventory", str(inv))
    assert refused.returncode == 2 and "literal secret refused" in refused.stderr
    assert "--allow-plaintext-secrets" in refused.stderr
    r = invoke(
        "inventory-check", "--inventory", str(inv), "--allow-plaintext-secrets", "--json", str(tmp_path / "r.json")
    )
    assert r.returncode == 0, r.stderr
    assert "Sup3rS3cret" not in r.stdout + r.stderr + (tmp_path / "r.json").read_text()


@pytest.mark.parametrize("name", ["group-cycle", "bmc-vendor-typo", "syntax-error-tab-indent", "duplicate-host"])
def test_bad_inventory_exits_nonzero_with_location_and_fix(name, tmp_path):
    path = BAD / f"{name}.yaml"
    r = invoke("inventory-check", "--inventory", str(path), "--json", str(tmp_path / "r.json"))
    assert r.returncode == 2
    assert f"{path}:" in r.stderr.replace("\n", "") or str(path) in r.stderr
    assert "fix:" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    doc = json.loads((tmp_path / "r.json").read_text())
    jsonschema.validate(doc, load_schema())
    assert doc["ok"] is False and doc["error"]["kind"] == "InventoryError"


def test_unknown_host_selection_exits_2():
    r = invoke("inventory-check", "--host", "lab-vn")
    assert r.returncode == 2
    assert "unknown host 'lab-vn'" in r.stderr and "did you mean 'lab-vm'" in r.stderr


def test_doctor_names_missing_tools_with_fixes(tmp_path):
    # a PATH holding only python: every external tool is missing, for real
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(sys.executable)
    r = invoke("doctor", "--pipeline", "kernel", "--json", str(tmp_path / "d.json"), env={"PATH": str(bindir)})
    assert r.returncode == 3, r.stdout + r.stderr
    doc = json.loads((tmp_path / "d.json").read_text())
    checks = {c["name"]: c for c in doc["data"]["checks"]}
    assert checks["kpatch-build"]["ok"] is False and "scripts/setup.sh" in checks["kpatch-build"]["fix"]
    assert checks["gcc-10"]["ok"] is False and "bullseye" in checks["gcc-10"]["fix"]
    assert checks["python:paramiko"]["ok"] is True
    assert "required check(s) failed" in r.stderr


def test_doctor_rejects_unknown_pipeline():
    r = invoke("doctor", "--pipeline", "bios")
    assert r.returncode == 2 and "not one of" in r.stderr


@pytest.mark.parametrize(
    "task",
    [
        "facts",
        "validate",
        "bios-plan",
        "bios-apply",
        "bios-verify",
        "livepatch-status",
        "livepatch-install",
        "livepatch-unload --module x",
    ],
)
def test_bad_host_timeout_exits_2_naming_the_option(task):
    r = invoke(*task.split(), "--inventory", "inventory/lab.yaml", "--host-timeout", "soon")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--host-timeout must be 0 (none) or a number of seconds, got 'soon'" in r.stderr.replace("\n", " ")
    assert "Traceback" not in r.stderr


def test_measure_and_no_measure_contradict():
    r = invoke("validate", "--inventory", "inventory/lab.yaml", "--measure", "--no-measure")
    assert r.returncode == 2 and "contradict" in r.stderr and "Traceback" not in r.stderr


def _string_options():
    """(task, option, required positional options) for every task option that takes a value (not a flag)."""
    from numaforge.cli.main import program

    out = []
    for name in sorted(program.namespace.task_names):
        args = program.namespace[name].get_arguments()
        required = [a.names[0] for a in args if a.positional]
        for a in args:
            if a.kind is not bool:
                out.append((name, a.names[0], required))
    return out


def test_every_option_of_every_task_refuses_an_empty_value(tmp_path, capsys):
    """Issue 25 item 6: `--inventory ''`, `--profile ''`, `--host ''`... exit 2 naming the option; the task body
    never runs: its --json report says "refused" with no host (the one rule for a refusal before any host,
    tests/hostile/test_refused_report.py). Walks invoke's Program over every task, in process."""
    from numaforge.cli.main import program

    cases = _string_options()
    assert len(cases) > 100 and ("bios-apply", "profile", []) in cases and ("facts", "host", []) in cases
    for task, option, required in cases:
        report = tmp_path / f"{task}-{option}.json"
        argv = ["numaforge", task, f"--{option}", ""]
        argv += [x for r in required if r != option for x in (f"--{r}", "x")]
        wants_report = option != "json" and any("json" in a.names for a in program.namespace[task].get_arguments())
        if wants_report:
            argv += ["--json", str(report)]
        with pytest.raises(SystemExit) as exc:
            program.run(argv)
        err = " ".join(capsys.readouterr().err.split())
        assert exc.value.code == 2, (argv, err)
        assert f"--{option}: the value '' is empty" in err and f"leave --{option} out" in err, (argv, err)
        if wants_report:
            doc = json.loads(report.read_text())
            assert doc["status"] == "refused" and doc["hosts"] == [] and f"--{option}" in doc["error"]["where"], doc


def test_blank_repeated_value_and_empty_root_are_usage_errors():
    r = invoke("facts", "--host", "lab", "--host", "  ")
    assert r.returncode == 2 and "--host: the value '  ' is empty" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run(
        [sys.executable, "-c", "from numaforge.cli.main import main; main()", "--root", "", "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "--root: the value '' is empty" in r.stderr


def test_an_empty_configured_inventory_is_an_error_not_the_lab(tmp_path):
    """numaforge.inventory: '' in the project's numaforge.yaml fell back to the lab inventory like
    `--inventory ''` did; it is refused with exit 2 naming the config key."""
    (tmp_path / "numaforge.yaml").write_text("numaforge:\n  inventory: ''\n")
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "from numaforge.cli.main import main; main()",
            "--root",
            str(tmp_path),
            "inventory-check",
            "--syntax-only",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200", "NUMAFORGE_STATE": str(tmp_path / "state")},
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "the config's numaforge.inventory is empty" in r.stderr and "remove the key" in r.stderr
    assert not (tmp_path / "state" / "lab").exists()  # the lab inventory was not written as a fallback


@pytest.mark.parametrize(
    "args, option",
    [
        (["os-apply", "--gate-seconds", "x"], "--gate-seconds"),
        (["os-apply", "--numa-node-override", "foo"], "--numa-node-override"),
        (["numa-audit", "--window", "0"], "--window"),
    ],
)
def test_bad_task_option_values_exit_2_without_a_traceback(args, option):
    """These were parsed in the task body before execute(): a NumaforgeError traceback, or exit 1."""
    r = invoke(*args, "--inventory", "inventory/lab.yaml")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"error: {option}:" in r.stderr and "fix:" in r.stderr and "Traceback" not in r.stderr


def test_inventory_check_answers_what_the_run_would_for_a_readable_or_device_key(tmp_path):
    """Issue 25 item 4: facts/os-plan refuse an SSH key others can read and one that is a device; inventory-check
    (preflight, through the same safeio.check_input) says so too, with the fix."""
    (tmp_path / "id_open").write_text("key\n")
    (tmp_path / "id_open").chmod(0o644)
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "hosts:\n"
        f"  a: {{ssh: {{address: a, key_file: '{tmp_path / 'id_open'}', known_hosts: '{inv}'}}}}\n"
        f"  b: {{ssh: {{address: b, key_file: /dev/zero, known_hosts: '{inv}'}}}}\n"
    )
    r = invoke("inventory-check", "--inventory", str(inv))
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert "a: ssh.key_file: private key" in out and "is readable by others (mode 0644)" in out
    assert f"chmod 600 {tmp_path / 'id_open'}" in out
    assert "b: ssh.key_file: private key /dev/zero is not a regular file" in out and "Traceback" not in out
