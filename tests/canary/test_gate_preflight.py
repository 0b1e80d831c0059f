"""Every --gate slo setting is parsed and checked before any host is touched (issue 40 items 1 and 5).

Through the CLI (`invoke ...` in a subprocess), for each task that takes --gate slo. The hosts' ssh address is a
listening socket of this test: after each run the test asks it whether anyone connected, so "no host touched"
is observed, not assumed (the code used to change the canaries, then fail on the setting). No Prometheus is
needed: every case is refused before one would be asked.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "s3cr3t-pw-40"


@pytest.fixture
def peer():
    """A listening TCP socket standing in for the hosts' sshd: it accepts nothing; connections queue up."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    s.setblocking(False)
    yield s
    s.close()


def _touched(peer: socket.socket) -> bool:
    try:
        conn, _ = peer.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def _inventory(tmp_path: Path, peer: socket.socket, slo_gate: dict | None = None) -> Path:
    port = peer.getsockname()[1]
    doc: dict[str, Any] = {
        "version": 1,
        "hosts": {n: {"ssh": {"address": "127.0.0.1", "port": port, "user": "root"}} for n in ("a", "b", "c")},
    }
    doc["hosts"]["a"]["vars"] = {"slo_gate": {"metric": "svc_seconds", "window": 3, **(slo_gate or {})}}
    p = tmp_path / "inv.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


# the tasks that take --gate slo, with what each needs besides the gate (numaforge.cli: gate=True RolloutSpecs)
TASKS = {
    "os-apply": ["--profile", "epyc-gpudirect-host"],
    "livepatch-install": ["--module", "MODULE"],
    "validate": ["--module", "MODULE", "--keep"],
}


def _run(task: str, inv: Path, *gate: str, report: Path | None = None, env: dict | None = None):
    argv = [sys.executable, "-m", "invoke", task, "-i", str(inv), "--all", "--canary", "1", "--gate", "slo"]
    ko = inv.parent / "livepatch_test.ko"
    ko.write_bytes(b"\x7fELF")
    argv += (
        [str(ko) if a == "MODULE" else a for a in TASKS[task]]
        + list(gate)
        + (["--json", str(report)] if report else [])
    )
    return subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        timeout=120,
    )


def test_the_gate_tasks_are_the_ones_the_code_has():
    """TASKS lists every task whose rollout takes --gate (derived from the namespace: a new one fails here)."""
    from numaforge.cli.main import namespace

    gated = {name for name, t in namespace().tasks.items() if getattr(getattr(t, "rollout", None), "gate", False)}
    assert gated == set(TASKS)


def _cases(tmp_path: Path) -> list[tuple[list[str], dict, dict, str, str]]:
    """(gate options, slo_gate inventory additions, env, what the error says, where it names)."""
    wide = tmp_path / "token-0644"
    wide.write_text("tok-1234\n")
    wide.chmod(0o644)
    empty_ca = tmp_path / "empty-ca.pem"
    empty_ca.write_text("not a certificate\n")
    return [
        (["--prometheus", f"http://user:{PASSWORD}@prom.example/"], {}, {}, "carries credentials", "--prometheus"),
        ([], {"prometheus": f"https://u:{PASSWORD}@prom.example"}, {}, "carries credentials", "slo_gate"),
        (["--prometheus", "ftp://prom.example/"], {}, {}, "scheme is 'ftp'", "--prometheus"),
        (["--prometheus", "http://prom.example/?x=1"], {}, {}, "?query or #fragment", "--prometheus"),
        (["--prometheus", "http://p", "--slo", "metric=bad-name"], {}, {}, "not a Prometheus metric name", "--slo"),
        (["--prometheus", "http://p", "--slo", "label=1x"], {}, {}, "not a Prometheus label name", "--slo"),
        ([], {"prometheus": "http://p", "metric": "x{y}"}, {}, "not a Prometheus metric name", "slo_gate"),
        (
            ["--prometheus", "http://p", "--slo", f"prometheus_token=file:{wide}"],
            {},
            {},
            "readable by others",
            "prometheus_token",
        ),
        (
            ["--prometheus", "http://p", "--slo", "prometheus_token=env:NF_TEST_UNSET_TOKEN_40"],
            {},
            {},
            "NF_TEST_UNSET_TOKEN_40 is not set",
            "prometheus_token",
        ),
        (
            ["--prometheus", "https://p", "--slo", f"prometheus_ca={tmp_path / 'missing.pem'}"],
            {},
            {},
            "No such file",
            "prometheus_ca",
        ),
        (
            ["--prometheus", "https://p", "--slo", f"prometheus_ca={empty_ca}"],
            {},
            {},
            "holds no PEM certificate",
            "prometheus_ca",
        ),
    ]


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_bad_gate_setting_exits_2_before_any_host_is_touched(task, tmp_path, peer):
    env = {k: v for k, v in os.environ.items() if k != "NF_TEST_UNSET_TOKEN_40"}
    assert "NF_TEST_UNSET_TOKEN_40" not in env
    for i, (opts, var, extra_env, what, where) in enumerate(_cases(tmp_path)):
        inv = _inventory(tmp_path, peer, var)
        report = tmp_path / f"r{i}.json"
        r = _run(task, inv, *opts, report=report, env=extra_env)
        out = " ".join((r.stdout + r.stderr).split())
        assert r.returncode == 2, (opts, var, out)
        assert what in out and where in out, (opts, var, out)
        assert "Traceback" not in out
        assert not _touched(peer), f"a host was contacted before {opts or var} was refused"
        assert PASSWORD not in out
        text = report.read_text()
        assert PASSWORD not in text, text
        doc = json.loads(text)
        assert doc["ok"] is False and not any(h.get("steps") for h in doc["hosts"]), doc["hosts"]
        # the one rule for a refusal before any host (tests/hostile/test_refused_report.py): it says so
        assert doc["status"] == "refused" and where in f"{doc['error']['where']} {doc['error']['what']}", doc


def test_the_token_file_check_is_the_secret_files_check(tmp_path):
    """A private token file passes the preflight (the 0644 refusal is the permission check, not any file)."""
    from numaforge.canary.gate import settings_from

    tok = tmp_path / "token"
    tok.write_text("tok-5678\n")
    tok.chmod(stat.S_IRUSR | stat.S_IWUSR)
    s = settings_from({}, ["metric=m", f"prometheus_token=file:{tok}"], "https://prom.example:9090/prefix")
    assert s.prometheus == "https://prom.example:9090/prefix" and s.prometheus_token == f"file:{tok}"


@pytest.mark.parametrize(
    ("url", "has"),
    [
        ("http://user:pw@host/", True),
        ("https://admin@10.0.0.5:443", True),
        ("https://:Sup3rS3cret@bmc", True),
        ("https://host/path@x", False),
        ("https://host?q=a@b", False),
        ("https://host:9090", False),
    ],
)
def test_one_credentials_check_for_every_url_and_reports_mask_url_passwords(url, has):
    """bmc.url (inventory), the Redfish client and --prometheus share secrets.url_has_credentials; a report or
    message holding such a URL shows its password masked (redact), even a 2-character one."""
    from numaforge.canary.prometheus import url_problem
    from numaforge.secrets import MASK, redact, url_has_credentials

    assert url_has_credentials(url) is has
    problem = url_problem(url)
    assert (problem is not None and "carries credentials" in problem) is has
    assert "pw" not in redact({"options": {"prometheus": "http://user:pw@host/"}})["options"]["prometheus"]
    assert redact("see http://user:pw@host/ now") == f"see http://{MASK}@host/ now"


def test_gateopts_check_is_callable_from_a_preflight_before_the_inventory():
    """gateopts.check(rollout) with no hosts: what the options give is checked (exit 2 naming it); a setting the
    inventory may still give (the metric) is not demanded yet; with the hosts, everything is."""
    from types import SimpleNamespace

    from numaforge.canary.gate import GateSettingError
    from numaforge.cli import gateopts
    from numaforge.fleet import Rollout

    for bad, where in (
        ("ftp://p", "--prometheus"),
        ("http://u:pw@p", "--prometheus"),
        ("http://p\x1b", "--prometheus"),
    ):
        with pytest.raises(GateSettingError) as e:
            gateopts.check(Rollout(canary=1, gate="slo", prometheus=bad))
        assert e.value.exit_code == 2 and where in e.value.where and "pw" not in e.value.render()
    with pytest.raises(GateSettingError, match="not a Prometheus metric name"):
        gateopts.check(Rollout(canary=1, gate="slo", prometheus="http://p", slo=("metric=a-b",)))
    partial = gateopts.check(Rollout(canary=1, gate="slo", prometheus="http://p"))
    assert partial is not None and partial.metric == ""
    hosts = [SimpleNamespace(name=n, vars={}) for n in ("a", "b")]
    with pytest.raises(GateSettingError, match="needs the metric setting"):
        gateopts.check(Rollout(canary=1, gate="slo", prometheus="http://p"), hosts)
    hosts[0].vars = {"slo_gate": {"metric": "svc_seconds"}}
    full = gateopts.check(Rollout(canary=1, gate="slo", prometheus="http://p"), hosts)
    assert full is not None and full.metric == "svc_seconds"
    assert gateopts.check(Rollout(canary=1)) is None
