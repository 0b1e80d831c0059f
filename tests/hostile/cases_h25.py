"""Issue 25 (Reliability III) cases: terminal control codes from inventories and BMCs, invalid JSON echoing the
credentials, BMCs that drip their answers, writes whose answer is lost, ETag refusals, profile render budgets,
and SSH files that must never be read (devices, FIFOs, huge or readable keys) under every SSH task."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cases_bmc import SESSIONS, bmc_case, fault
from cases_input import INVENTORY, _write, inventory_text, profile_case
from harness import Case, Outcome, cli

# name, YAML double-quoted form, how numaforge must show it (regex of the escaped form)
CONTROLS = [
    ("clear-screen", r"\e[2J", r"\\x1b\[2J"),
    ("osc-title", r"\e]0;pwned\a", r"\\x1b\]0;pwned\\x07"),
    ("bel", r"\a\a", r"\\x07\\x07"),
    ("carriage-return", r"ok\rFAKE", r"ok\\(x0d|r)FAKE"),
    ("backspace", r"abc\b\b\b", r"abc\\x08\\x08\\x08"),
    ("c1-csi", r"\x9b2J", r"\\x9b2J"),
    ("bidi-override", r"\u202egnp.exe", r"\\u202egnp\.exe"),
]


def _control_inventory_cases() -> list[Case]:
    places = {
        # where the hostile text goes in the inventory, what numaforge says about it (regex, {esc} = escaped form)
        "unknown-key": ('hosts:\n  h1:\n    "x{raw}": 1\n    ssh: {{address: h1}}\n', r"unknown key .*x{esc}"),
        "vendor": (
            "hosts:\n  h1:\n    bmc: {{url: 'https://b', username: a, password: 'env:X', vendor: \"v{raw}\"}}\n",
            r"v{esc}",
        ),
        "group-host": ('hosts:\n  h1: {{ssh: {{address: h1}}}}\ngroups:\n  g: {{hosts: ["h{raw}"]}}\n', r"h{esc}"),
        "bmc-url": ("hosts:\n  h1:\n    bmc: {{url: \"https://b{raw}\", username: a, password: 'env:X'}}\n", r"b{esc}"),
        "sockets": ('hosts:\n  h1:\n    ssh: {{address: h1}}\n    hardware: {{sockets: "2{raw}"}}\n', r"2{esc}"),
        "profile-name": ('hosts:\n  h1:\n    ssh: {{address: h1}}\n    bios_profile: "p{raw}"\n', r"p{esc}"),
    }
    cases = []
    for place, (template, msg) in places.items():
        for name, raw, esc in CONTROLS:
            text = template.format(raw=raw)
            cases.append(
                Case(
                    f"control/inventory-{place}-{name}", "control", _inventory_check(text), msg.format(esc=esc), code=2
                )
            )
    return cases


def _inventory_check(text: str):
    def run(tmp: Path) -> Outcome:
        inv = _write(tmp, "inv.yaml", text)
        return cli("inventory-check", "--inventory", str(inv), "--syntax-only")

    return run


def _control_bmc_cases() -> list[Case]:
    cases = []
    for cmd, path, method in [
        ("bios-plan", "bios_path", "GET"),
        ("bios-apply", "settings_path", "PATCH"),
        ("bios-verify", "settings_path", "GET"),
    ]:
        for name, raw, esc in CONTROLS:
            cases.append(
                Case(
                    f"control/bmc-{cmd}-{name}",
                    "control",
                    bmc_case(
                        cmd, setup=fault("5xx", path, method, status=400, message="firmware says " + _unescape(raw))
                    ),
                    r"firmware says " + esc,
                    code=1,
                    tier="bmc",
                )
            )
    return cases


def _unescape(yaml_form: str) -> str:
    return (
        yaml_form.replace(r"\e", "\x1b")
        .replace(r"\a", "\x07")
        .replace(r"\r", "\r")
        .replace(r"\b", "\b")
        .replace(r"\x9b", "\x9b")
        .replace(r"\u202e", "\u202e")
    )


LEAK_MSG = r"(invalid JSON|answered|gave up)"
BAD_JSON_ECHO = [
    Case(
        f"leak/bad-json-echo-{name}",
        "bmc-leak",
        bmc_case(cmd, setup=fault("bad_json", path, method, echo=True)),
        msg,
        code=1,
        tier="bmc",
    )
    for name, cmd, path, method, msg in [
        ("get-bios", "bios-plan", "bios_path", "GET", r"invalid JSON.*gave up after \d attempts"),
        ("get-system", "bios-plan", "system_path", "GET", r"invalid JSON.*gave up after \d attempts"),
        ("get-settings", "bios-plan", "settings_path", "GET", r"invalid JSON.*gave up after \d attempts"),
        ("get-root", "bios-plan", "^/redfish/v1/?$", "GET", LEAK_MSG),
        ("patch-settings", "bios-apply", "settings_path", "PATCH", r"PATCH .*invalid JSON \(HTTP 200\)"),
        ("verify-get-bios", "bios-verify", "bios_path", "GET", r"invalid JSON.*gave up after \d attempts"),
        ("jobs-get-system", "bios-jobs", "system_path", "GET", LEAK_MSG),
        ("session-login", "bios-plan", SESSIONS, "POST", LEAK_MSG),
    ]
]

DRIP_MSG = (
    r"--host-timeout of 3 s; stopped before the answer to (GET|POST) .* \(cut: the BMC had not finished answering"
)
DRIP = [
    Case(
        f"hang/drip-{name}",
        "bmc-hang",
        bmc_case(cmd, "--host-timeout", "3", setup=fault("drip", path, method, interval=0.5)),
        msg,
        code=1,
        tier="bmc",
    )
    for name, cmd, path, method, msg in [
        ("get-root", "bios-plan", "^/redfish/v1/?$", "GET", DRIP_MSG),
        ("get-system", "bios-plan", "system_path", "GET", DRIP_MSG),
        ("get-bios", "bios-plan", "bios_path", "GET", DRIP_MSG),
        ("get-settings-apply", "bios-apply", "settings_path", "GET", DRIP_MSG),
        ("session-login", "bios-plan", SESSIONS, "POST", DRIP_MSG),
        ("verify-get-bios", "bios-verify", "bios_path", "GET", DRIP_MSG),
    ]
]


def _patched_once(kind: str, after: bool = True, **opts):
    """A PATCH whose answer is lost after the BMC acted: the run re-reads what the BMC holds and reports it;
    a second PATCH counts as a wrong write."""

    def run(tmp: Path) -> Outcome:
        seen: dict = {}

        def setup(ctx):
            seen["sim"] = ctx["sim"]
            fault(kind, "settings_path", "PATCH", after=after, **opts)(ctx)

        out = bmc_case("bios-apply", setup=setup, allowed_pending=True)(tmp)
        out.writes += max(0, seen["sim"].count("PATCH") - 1)
        return out

    return run


_LOST_AFTER: list[tuple[str, str, dict[str, Any]]] = [  # name, fault kind, fault options
    ("patch-500-after", "5xx", {"status": 500}),
    ("patch-502-after", "5xx", {"status": 502}),
    ("patch-504-after", "5xx", {"status": 504}),
    ("patch-bad-json-after", "bad_json", {"echo": True}),
]

AFTER = [  # the BMC acted, then the answer was lost: never sent twice; what the BMC holds is what is reported
    Case(
        f"lost/{name}",
        "bmc-lost",
        _patched_once(kind, **opts),
        r"h1 +changed +7 written, 7 pending",
        ok=True,
        tier="bmc",
    )
    for name, kind, opts in _LOST_AFTER
]

STAGED = [  # the BMC answered the PATCH as accepted but staged nothing / another value: must not say ok
    Case(f"staged/{name}", "bmc-staged", _patched_once(kind, after=False), msg, code=1, tier="bmc")
    for name, kind, msg in [
        ("patch-staged-nothing", "stage_nothing", r"(not staged|staged nothing|read back|pending .* not)"),
        ("patch-staged-other-values", "stage_other", r"(does not hold what was sent|staged .* instead|another value)"),
    ]
]

ETAG = [
    Case(
        f"etag/{name}",
        "bmc-etag",
        bmc_case("bios-apply", setup=fault("5xx", "settings_path", "PATCH", status=st)),
        rf"answered {st}",
        code=1,
        tier="bmc",
    )
    for name, st in [("patch-412", 412), ("patch-428", 428)]
]


def _budget_profile(body: str):
    run = profile_case(body)

    def budgeted(tmp: Path) -> Outcome:
        from numaforge import budgeted as b

        saved = b.RENDER_SECONDS
        b.RENDER_SECONDS = 1.0
        try:
            return run(tmp)
        finally:
            b.RENDER_SECONDS = saved

    return budgeted


HEAD = "settings:\n  numa_nodes_per_socket: 4\n"
BUDGET_MSG = r"p\.yaml\.j2(:\d+)?: profile went past its render budget: .*{}.*fix: a profile computes a few settings"
PROFILE_BUDGET = [
    Case(f"profile/budget-{name}", "profile", _budget_profile(body), BUDGET_MSG.format(msg), code=1)
    for name, body, msg in [
        (
            "nested-loops",
            "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}\n" + HEAD,
            r"rendering took more than 1 s",
        ),
        (
            "triple-loops",
            "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}"
            "{% endfor %}{% endfor %}{% endfor %}\n" + HEAD,
            r"rendering took more than 1 s",
        ),
        ("string-repeat", "description: '{{ \"x\" * 100000000 }}'\n" + HEAD, r"repeating a str"),
        ("list-repeat", "description: '{{ ([1] * 100000000) | length }}'\n" + HEAD, r"repeating a list"),
        ("repeat-reversed", "description: '{{ 100000000 * \"ab\" }}'\n" + HEAD, r"repeating a str"),
        ("huge-power", "description: '{{ 10 ** 100000000 }}'\n" + HEAD, r"too large a number"),
        ("huge-range", "{% for a in range(1000000000) %}{% endfor %}\n" + HEAD, r"range of 1000000000 items"),
        (
            "output-bomb",
            "description: '{% for a in range(100000) %}{{ 'y' * 100 }}{% endfor %}'\n" + HEAD,
            r"renders to more than 1048576 characters",
        ),
    ]
]


EXPRESSION = [  # Python refusing a template expression was "internal error (a bug)", exit 70 (issue 25 item 8)
    Case(f"profile/expression-{name}", "profile", profile_case(body), msg, code=1)
    for name, body, msg in [
        (
            "recursive-macro",
            "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}\n" + HEAD,
            r"p\.yaml\.j2:1: a macro or loop in the profile calls itself without end.*fix: give the recursive macro",
        ),
        (
            "floor-division-by-zero",
            "settings:\n  numa_nodes_per_socket: {{ 4 // 0 }}\n",
            r"p\.yaml\.j2:2: the profile divides by zero.*fix: guard the divisor",
        ),
        (
            "modulo-by-zero",
            "settings:\n  numa_nodes_per_socket: {{ 4 % 0 }}\n",
            r"p\.yaml\.j2:2: the profile divides by zero.*fix: guard the divisor",
        ),
        (
            "division-by-zero-of-a-fact",
            "settings:\n  numa_nodes_per_socket: {{ sockets / (gpu_count - gpu_count) }}\n",
            r"p\.yaml\.j2:2: the profile divides by zero",
        ),
        (
            "str-plus-int",
            "description: '{{ \"a\" + 1 }}'\n" + HEAD,
            r"p\.yaml\.j2:1: a template expression failed: TypeError.*fix: fix the expression at that line",
        ),
        (
            "float-overflow",
            "description: '{{ 1.5 ** 100000 }}'\n" + HEAD,
            r"p\.yaml\.j2:1: a template expression failed: OverflowError",
        ),
    ]
]


_H = (
    "hosts:\n  h1:\n    bmc: {url: 'https://bmc-h1.example', username: admin, password: 'env:NF_FAULT_BMC_PW', "
    "vendor: dell}\n"
)
INVENTORY_EDGES = [  # numbers and shapes at their edges: each a clear file:line answer, exit 2
    Case(f"inventory/edge-{name}", "inventory", inventory_text(text), r"inv\.yaml:\d+: .*" + msg + r".*fix: ", code=2)
    for name, text, msg in [
        ("sockets-0", _H + "    hardware: {sockets: 0}\n", r"hardware\.sockets 0 is out of range"),
        ("sockets-negative", _H + "    hardware: {sockets: -3}\n", r"hardware\.sockets -3 is out of range"),
        ("sockets-huge", _H + "    hardware: {sockets: 100000000000000000000000}\n", r"is out of range"),
        ("sockets-nan", _H + "    hardware: {sockets: .nan}\n", r"must be an integer, got a number \(nan\)"),
        ("sockets-inf", _H + "    hardware: {sockets: .inf}\n", r"must be an integer, got a number \(inf\)"),
        ("gpus-string", _H + "    hardware: {gpus: 'abc'}\n", r"hardware\.gpus must be a list"),
        ("gpus-bad-address", _H + "    hardware: {gpus: ['zz:zz']}\n", r"'zz:zz' is not a PCI address"),
        ("hardware-list", _H + "    hardware: [1, 2]\n", r"must be a mapping"),
        (
            "ssh-port-huge",
            "hosts:\n  h1:\n    ssh: {address: h1, port: 99999999999999999999}\n",
            r"ssh\.port .* out of range",
        ),
        ("ssh-port-float", "hosts:\n  h1:\n    ssh: {address: h1, port: 22.5}\n", r"ssh\.port must be an integer"),
        ("ssh-port-0", "hosts:\n  h1:\n    ssh: {address: h1, port: 0}\n", r"ssh\.port 0 is out of range"),
        (
            "group-child-of-itself",
            "hosts:\n  h1: {ssh: {address: h1}}\ngroups:\n  g: {children: [g], hosts: [h1]}\n",
            r"groups form a cycle: g -> g",
        ),
        ("host-name-integer", "hosts:\n  1: {ssh: {address: h1}}\n", r"host name 1 is not valid"),
        ("host-null", "hosts:\n  h1:\n", r"host 'h1' has neither `ssh:` nor `bmc:`"),
        ("hosts-a-list", "hosts: [a, b]\n", r"hosts must be a mapping"),
    ]
]


def _profile_file(make):
    def run(tmp: Path) -> Outcome:
        inv = _write(tmp, "inv.yaml", INVENTORY)
        return cli("bios-render", "--inventory", str(inv), "--profile", str(make(tmp)))

    return run


def _huge_profile(tmp: Path) -> Path:
    return _write(tmp, "big.yaml.j2", "settings:\n  iommu: true\n" + "#" * (2 * 1024 * 1024))


def _symlinked_device_profile(tmp: Path) -> Path:
    (tmp / "dev.yaml.j2").symlink_to("/dev/zero")
    return tmp / "dev.yaml.j2"


PROFILE_FILES = [
    Case(
        "profile/file-huge",
        "profile",
        _profile_file(_huge_profile),
        r"big\.yaml\.j2: profile is \d+ bytes, more than the 1048576-byte limit.*fix: ",
        code=None,
    ),
    Case(
        "profile/file-symlink-to-dev-zero",
        "profile",
        _profile_file(_symlinked_device_profile),
        r"dev\.yaml\.j2: BIOS profile is not a regular file.*fix: ",
        code=None,
    ),
]


# --------------------------------------------------------------------------------------------------- SSH files
SSH_TASKS = {
    "facts": ("facts",),
    "os-plan": ("os-plan", "--profile", "epyc-gpudirect-host"),
    "numa-audit": ("numa-audit",),
    "livepatch-status": ("livepatch-status",),
}


def _ssh_file(kind: str, tmp: Path) -> Path:
    if kind == "dev-zero":
        return Path("/dev/zero")
    p = tmp / f"f-{kind}"
    if kind == "fifo":
        os.mkfifo(p, 0o600)
    elif kind == "directory":
        p.mkdir()
    elif kind == "huge":
        p.write_bytes(b"k" * (5 * 1024 * 1024))
        p.chmod(0o600)
    elif kind == "readable":
        p.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
        p.chmod(0o644)
    return p


SSH_FILE_MSG = {
    "dev-zero": "is not a regular file",
    "fifo": "is not a regular file",
    "directory": "is a directory",
    "huge": "more than the \\d+-byte limit",
    "readable": "is readable by others",
}


def _ssh_case(task: str, field: str, kind: str):
    def run(tmp: Path) -> Outcome:
        bad = _ssh_file(kind, tmp)
        kh = _write(tmp, "known_hosts", "")
        cfg = _write(tmp, "ssh_config", "")
        files = {"key_file": bad if field == "key_file" else None, "known_hosts": kh, "config_file": cfg}
        files[field] = bad
        ssh = ", ".join(f"{k}: '{v}'" for k, v in files.items() if v is not None)
        inv = _write(
            tmp,
            "inv.yaml",
            f"hosts:\n  h1:\n    ssh: {{address: 127.0.0.1, port: 9, {ssh}}}\n    hardware: {{sockets: 2}}\n",
        )
        return cli(*SSH_TASKS[task], "--inventory", str(inv), "--host", "h1")

    return run


def _ssh_cases() -> list[Case]:
    cases = []
    for task in SSH_TASKS:
        for kind in ("dev-zero", "fifo", "directory", "huge", "readable"):
            cases.append(
                Case(
                    f"ssh/{task}-key-{kind}",
                    "ssh",
                    _ssh_case(task, "key_file", kind),
                    rf"SSH private key .*{SSH_FILE_MSG[kind]}.*fix: ",
                    code=None,
                )
            )
        for field, what in (("known_hosts", "known_hosts"), ("config_file", "ssh_config file")):
            cases.append(
                Case(
                    f"ssh/{task}-{field}-dev-zero",
                    "ssh",
                    _ssh_case(task, field, "dev-zero"),
                    rf"{what} /dev/zero is not a regular file.*fix: ",
                    code=None,
                )
            )
    return cases


def _ca_bundle(kind: str):
    def setup(ctx):
        tmp = ctx["tmp"]
        if kind == "dev-zero":
            ctx["ca"] = "/dev/zero"
        elif kind == "fifo":
            os.mkfifo(tmp / "ca.fifo")
            ctx["ca"] = str(tmp / "ca.fifo")
        elif kind == "directory":
            ctx["ca"] = str(tmp)
        else:
            (tmp / "huge.pem").write_bytes(b"#" * (17 * 1024 * 1024))
            ctx["ca"] = str(tmp / "huge.pem")

    return setup


CA_MSG = {
    "dev-zero": "is not a regular file",
    "fifo": "is not a regular file",
    "directory": "path is a directory",
    "huge": r"more than the \d+-byte limit",
}
CA_BUNDLES = [  # OpenSSL reads bmc.ca_bundle itself: a FIFO blocked the run, /dev/zero never ended
    Case(
        f"bmc/ca-bundle-{kind}-{cmd}",
        "bmc",
        bmc_case(cmd, setup=_ca_bundle(kind)),
        rf"h1 \(bmc\.ca_bundle\): CA bundle .*{CA_MSG[kind]}.*fix: point bmc\.ca_bundle",
        code=1,
        tier="bmc",
    )
    for kind in CA_MSG
    for cmd in ("bios-plan", "bios-apply")
]


def cases() -> list[Case]:
    return (
        _control_inventory_cases()
        + _control_bmc_cases()
        + BAD_JSON_ECHO
        + DRIP
        + AFTER
        + STAGED
        + ETAG
        + PROFILE_BUDGET
        + EXPRESSION
        + PROFILE_FILES
        + INVENTORY_EDGES
        + CA_BUNDLES
        + _ssh_cases()
    )
