"""Profile file messages (issue 40, "unclear"): a missing `extends:` parent is named at the child's `extends:`
line (file:line), not at the directory searched; a profile that is not UTF-8 names the file, its line and the
byte offset instead of a raw UnicodeDecodeError ("a bug"). Both pipelines' profiles (BIOS and host OS) render
through numaforge.templating: every case runs for each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from numaforge.bios import profile as bios_profile
from numaforge.errors import ProfileError
from numaforge.hostos import profile as hostos_profile
from numaforge.inventory.model import HardwareSpec, Host, Location
from numaforge.templating import host_facts

pytestmark = pytest.mark.hostile

ROOT = Path(__file__).resolve().parents[2]
# each pipeline's profile renderer and a valid body of its own
PIPELINES = {
    "bios": (bios_profile.render_profile, "settings:\n  numa_nodes_per_socket: 1\n", "BIOS profile"),
    "hostos": (hostos_profile.render_profile, "sysctl:\n  vm.swappiness: 10\n", "host profile"),
}


def _facts():
    return host_facts(Host(name="h", location=Location("<test>"), hardware=HardwareSpec(sockets=2)))


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_a_missing_extends_parent_is_named_at_its_line(tmp_path, pipeline):
    render, body, kind = PIPELINES[pipeline]
    child = tmp_path / "child.yaml.j2"
    child.write_text(f"{{# a comment #}}\ndescription: x\nextends: no-such-parent\n{body}")
    (tmp_path / "no-such-paren.yaml.j2").write_text(body)
    with pytest.raises(ProfileError) as exc:
        render(str(child), _facts())
    assert exc.value.where == f"{child}:3", exc.value.render()
    assert f"`extends: no-such-parent` names an unknown {kind}" in exc.value.what and str(tmp_path) in exc.value.what
    assert "did you mean 'no-such-paren'?" in exc.value.fix


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
@pytest.mark.parametrize("in_parent", [False, True])
def test_a_profile_that_is_not_utf8_names_file_line_and_offset(tmp_path, pipeline, in_parent):
    render, body, _kind = PIPELINES[pipeline]
    latin = b"description: x\n# caf\xe9 au lait\n" + body.encode()
    offset = latin.index(b"\xe9")
    target = tmp_path / ("parent.yaml.j2" if in_parent else "p.yaml.j2")
    target.write_bytes(latin)
    if in_parent:
        (tmp_path / "p.yaml.j2").write_text(f"extends: parent\n{body}")
    with pytest.raises(ProfileError) as exc:
        render(str(tmp_path / "p.yaml.j2"), _facts())
    assert exc.value.where == f"{target}:2", exc.value.render()
    assert f"byte 0xe9 at byte offset {offset}" in exc.value.what and "UTF-8" in exc.value.fix


def test_os_plan_with_a_non_utf8_profile_is_not_a_bug(tmp_path):
    bad = tmp_path / "bad.yaml.j2"
    bad.write_bytes(b"sysctl:\n  vm.swappiness: 10 # \xff\n")
    inv = tmp_path / "inv.yaml"
    inv.write_text("version: 1\nhosts:\n  h1:\n    ssh: {address: 127.0.0.1, port: 1, agent: false}\n")
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(ROOT), "os-plan", "-i", str(inv), "--profile", str(bad)]
        + ["--json", str(tmp_path / "r.json")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    message = json.loads((tmp_path / "r.json").read_text())["hosts"][0]["message"]
    assert r.returncode != 0 and "a bug" not in message and "UnicodeDecodeError" not in message
    assert f"{bad}:2" in message and "not UTF-8" in message
