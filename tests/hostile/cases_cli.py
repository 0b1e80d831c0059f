"""Fault cases of the command line: option values and output paths (in-process, no peer)."""

from __future__ import annotations

import os
from pathlib import Path

from harness import Case, Outcome, cli

INVENTORY = """\
hosts:
  h1:
    bmc: {url: 'https://127.0.0.1:9', username: admin, password: 'env:NF_FAULT_BMC_PW', vendor: dell}
    hardware: {platform: t, vendor: dell, sockets: 2}
    bios_profile: epyc-gpudirect
"""


def _inv(tmp: Path) -> Path:
    p = tmp / "inv.yaml"
    p.write_text(INVENTORY)
    return p


def task(*args: str) -> "callable":
    """Run a task with a valid one-host inventory (its BMC port is closed) and ``args``; count new files."""
    def run(tmp: Path) -> Outcome:
        inv = _inv(tmp)
        before = set(os.listdir(tmp))
        out = cli(*[a.replace("{tmp}", str(tmp)) for a in args], "--inventory", str(inv), cwd=tmp)
        out.writes = len(set(os.listdir(tmp)) - before)
        return out
    return run


BAD_VALUES = {
    ("bios-plan", "--forks"): ["abc", "0", "-1", "1.5", ""],
    ("bios-verify", "--forks"): ["abc", "0"],
    ("bios-apply", "--forks"): ["abc", "0", "2x"],
    ("bios-apply", "--canary"): ["abc", "-1", "0.5"],
    ("bios-apply", "--max-fail"): ["abc", "101", "-1", "nan", "inf"],
    ("bios-apply", "--graceful-timeout"): ["abc", "0", "-5", "nan", "inf"],
    ("bios-apply", "--power-timeout"): ["abc", "0", "-1"],
    ("bios-apply", "--host-timeout"): ["abc", "-3"],
    ("facts", "--forks"): ["abc", "0"],
    ("validate", "--forks"): ["abc", "0"],
    ("validate", "--canary"): ["x", "-2"],
    ("validate", "--batch"): ["x", "-1"],
    ("validate", "--max-fail"): ["x", "100.5"],
    ("validate", "--effect-seconds"): ["abc", "0"],
    ("validate", "--rounds"): ["abc", "0"],
    ("validate", "--signal-after"): ["abc", "-1"],
    ("validate", "--revert-after"): ["abc", "0"],
    ("build-kpatch", "--jobs"): ["abc", "0"],
}


def _value_cases() -> list[Case]:
    cases = []
    for (name, option), bad in BAD_VALUES.items():
        for value in bad:
            shown = repr(value)
            expect = (rf"{option}: the value '' is empty.*fix: " if not value    # one check for every option
                      else rf"{option}: {option} must be .*({re_escape(shown)}|got {re_escape(value)}\b).*fix: ")
            cases.append(Case(f"cli/{name}{option}={value or 'empty'}", "cli", task(name, option, value), expect,
                              code=2))
    return cases


def re_escape(text: str) -> str:
    import re
    return re.escape(text)


def _fifo(tmp: Path) -> str:
    os.mkfifo(tmp / "fifo")
    return str(tmp / "fifo")


def json_to(make_path, task_name: str = "inventory-check") -> "callable":
    def run(tmp: Path) -> Outcome:
        inv = _inv(tmp)
        path = make_path(tmp)
        before = set(os.listdir(tmp))
        out = cli(task_name, "--inventory", str(inv), "--json", path, cwd=tmp)
        out.writes = len(set(os.listdir(tmp)) - before)
        return out
    return run


def _a_file(tmp: Path) -> str:
    (tmp / "afile").write_text("x")
    return str(tmp / "afile" / "r.json")


JSON_CASES = [
    Case("cli/json-to-directory", "cli", json_to(lambda tmp: str(tmp)), r"--json: .* is a directory.*fix: name a file",
         code=2),
    Case("cli/json-to-proc", "cli", json_to(lambda tmp: "/proc/self/comm"), r"--json: /proc/self/comm is in /proc",
         code=2),
    Case("cli/json-to-dev-stdout", "cli", json_to(lambda tmp: "/dev/stdout"),
         r"--json: /dev/stdout is in /(proc|dev).*--json - for standard output", code=2),
    Case("cli/json-to-dev-null", "cli", json_to(lambda tmp: "/dev/null"), r"--json: /dev/null is in /dev", code=2),
    Case("cli/json-to-fifo", "cli", json_to(_fifo), r"--json: .*fifo is not a regular file", code=2),
    Case("cli/json-under-a-file", "cli", json_to(_a_file), r"--json: .*(a parent of this path is a file|not a directory)",
         code=2),
    Case("cli/json-missing-parent", "cli", json_to(lambda tmp: str(tmp / "no" / "such" / "r.json")),
         r"--json: the directory .*no/such does not exist.*mkdir -p", code=2),
    Case("cli/json-empty", "cli", json_to(lambda tmp: ""), r"--json: the value '' is empty", code=2),
    Case("cli/json-bad-before-any-work", "cli", json_to(lambda tmp: str(tmp), "bios-plan"),
         r"--json: .* is a directory", code=2),
    Case("cli/junit-to-directory", "cli", task("validate", "--junit", "{tmp}"), r"--junit: .* is a directory", code=2),
]


def cases() -> list[Case]:
    return _value_cases() + JSON_CASES
