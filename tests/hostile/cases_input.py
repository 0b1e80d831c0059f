"""Fault cases that need no peer: inventories, YAML attacks, profiles, vendor maps, secrets (all in-process)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from harness import ROOT, Case, Outcome, call, cli

BAD_INVENTORIES = ROOT / "tests" / "data" / "inventory" / "bad"
PW_VAR = "NF_FAULT_BMC_PW"
PASSWORD = "fault-Campaign-pw-77"

INVENTORY = """\
hosts:
  h1:
    bmc: {url: 'https://bmc-h1.example', username: admin, password: 'env:NF_FAULT_BMC_PW', vendor: dell}
    hardware: {platform: t, vendor: dell, sockets: 2}
    bios_profile: epyc-gpudirect
"""

BOMB = "".join(
    f"{c}: &{c} [" + ",".join([f"*{p}"] * 9 if p else ['"lol"'] * 9) + "]\n"
    for p, c in zip([None, "a", "b", "c", "d", "e", "f", "g", "h"], "abcdefghi")
)


def _write(tmp: Path, name: str, text: str | bytes) -> Path:
    p = tmp / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def inventory_text(text: str | bytes, *extra: str) -> Callable:
    def run(tmp: Path) -> Outcome:
        return cli("inventory-check", "--inventory", str(_write(tmp, "inv.yaml", text)), *extra)

    return run


def inventory_path(make) -> Callable:
    def run(tmp: Path) -> Outcome:
        return cli("inventory-check", "--inventory", str(make(tmp)))

    return run


def _fifo(tmp: Path) -> Path:
    p = tmp / "fifo.yaml"
    os.mkfifo(p)
    return p


def _big(tmp: Path) -> Path:
    p = tmp / "big.yaml"
    with open(p, "w") as fh:
        fh.write("hosts:\n")
        fh.write("# padding\n" * 500_000)
    return p


def profile_case(body: str, *extra: str) -> Callable:
    """bios-render of one host with a profile file holding ``body`` (no BMC contact)."""

    def run(tmp: Path) -> Outcome:
        inv = _write(tmp, "inv.yaml", INVENTORY)
        prof = _write(tmp, "p.yaml.j2", body)
        return cli("bios-render", "--inventory", str(inv), "--profile", str(prof), *extra)

    return run


def vendor_map_case(text: str) -> Callable:
    def run(tmp: Path) -> Outcome:
        from numaforge.bios.vendors import load_vendor_map

        (tmp / "v").mkdir()
        _write(tmp / "v", "dell.yaml", text)
        return call(lambda: load_vendor_map("dell", tmp / "v"))

    return run


def _inventory_cases() -> list[Case]:
    cases = []
    for p in sorted(BAD_INVENTORIES.glob("*.yaml")):
        m = re.match(r"# expect: (?::(\d+): )?(.*)$", p.read_text().splitlines()[0])
        if m is None:
            raise ValueError(f"{p}: the first line must be '# expect: [:LINE: ]FRAGMENT'")
        line, fragment = m.group(1), m.group(2)
        msg = (re.escape(f"{p.name}:{line}: ") + ".*" if line else "") + ".*".join(
            re.escape(part) for part in fragment.split("; ")
        )
        cases.append(
            Case(
                f"inventory/{p.stem}",
                "inventory",
                (lambda path: lambda tmp: cli("inventory-check", "--inventory", str(path)))(p),
                msg,
                code=2,
            )
        )
    return cases


YAML_CASES = [
    Case("yaml/alias-bomb-inventory", "yaml", inventory_text(BOMB), r"expands to more than \d+ values", code=2),
    Case("yaml/recursive-alias", "yaml", inventory_text("a: &a [*a]\n"), r"inv\.yaml.*(alias|YAML)", code=2),
    Case(
        "yaml/dev-zero",
        "yaml",
        lambda tmp: cli("inventory-check", "--inventory", "/dev/zero"),
        r"/dev/zero: inventory( file)? is not a regular file",
        code=2,
    ),
    Case(
        "yaml/dev-null",
        "yaml",
        lambda tmp: cli("inventory-check", "--inventory", "/dev/null"),
        r"/dev/null: inventory( file)? is not a regular file",
        code=2,
    ),
    Case("yaml/fifo", "yaml", inventory_path(_fifo), r"fifo\.yaml: inventory( file)? is not a regular file", code=2),
    Case("yaml/directory", "yaml", inventory_path(lambda tmp: tmp), r"is a directory", code=2),
    Case("yaml/too-big", "yaml", inventory_path(_big), r"more than the \d+(-byte)? limit", code=2),
    Case(
        "yaml/missing",
        "yaml",
        inventory_path(lambda tmp: tmp / "nope.yaml"),
        r"nope\.yaml: inventory file not found",
        code=2,
    ),
    Case("yaml/not-utf8", "yaml", inventory_text(b"hosts:\n  h\xff: {}\n"), r"not UTF-8", code=2),
    Case(
        "yaml/python-tag",
        "yaml",
        inventory_text("hosts: !!python/object/apply:os.system ['id']\n"),
        r"inv\.yaml:1: .*(tag|could not determine)",
        code=2,
    ),
    Case(
        "yaml/duplicate-top-key",
        "yaml",
        inventory_text(INVENTORY + "hosts: {}\n"),
        r"inv\.yaml:6: duplicate key 'hosts' \(first defined on line 1\)",
        code=2,
    ),
    Case(
        "yaml/duplicate-nested-key",
        "yaml",
        inventory_text(INVENTORY.replace("    bios_profile", "    bios_profile: x\n    bios_profile")),
        r"inv\.yaml:6: duplicate key 'bios_profile'",
        code=2,
    ),
    Case(
        "yaml/two-documents",
        "yaml",
        inventory_text(INVENTORY + "---\nhosts: {}\n"),
        r"inv\.yaml:7: more than one YAML document",
        code=2,
    ),
    Case(
        "yaml/deep-nesting",
        "yaml",
        inventory_text("a: " + "[" * 5000 + "]" * 5000 + "\n"),
        r"inv\.yaml.*(too deep|nesting)",
        code=2,
    ),
    Case(
        "yaml/markup-in-key",
        "yaml",
        inventory_text(INVENTORY.replace("bios_profile", "'[/b]bios_profile'")),
        r"\[/b\]bios_profile",
        code=2,
    ),
    Case(
        "inventory/bmc-url-credentials-never-printed",
        "inventory",
        inventory_text(INVENTORY.replace("https://bmc-h1.example", "https://root:Url-Pw-991@bmc-h1.example")),
        r"inv\.yaml:3: host 'h1': bmc\.url carries credentials \(user:password@ before the host name\).*bmc\.password",
        code=2,
        secrets=("Url-Pw-991",),
    ),
    Case(
        "yaml/markup-in-path",
        "yaml",
        lambda tmp: cli("inventory-check", "--inventory", str(tmp / "[/b]nope[red].yaml")),
        r"\[/b\]nope\[red\]\.yaml: inventory file not found",
        code=2,
    ),
]

PROFILE_HEAD = "settings:\n  numa_nodes_per_socket: 4\n"
PROFILE_CASES = [
    Case(
        "profile/duplicate-setting",
        "profile",
        profile_case(PROFILE_HEAD + "  iommu: true\n  iommu: false\n"),
        r"p\.yaml\.j2 \(rendered line 4: 'iommu: false'\).*duplicate key 'iommu' \(first defined on line 3\)",
    ),
    Case(
        "profile/two-settings-blocks",
        "profile",
        profile_case(PROFILE_HEAD + "settings:\n  iommu: false\n"),
        r"rendered line 3.*duplicate key 'settings'",
    ),
    Case(
        "profile/duplicate-raw-attribute",
        "profile",
        profile_case(PROFILE_HEAD + "raw:\n  dell: {ProcCStates: Disabled, ProcCStates: Enabled}\n"),
        r"duplicate key 'ProcCStates'",
    ),
    Case("profile/alias-bomb", "profile", profile_case(BOMB), r"expands to more than \d+ values"),
    Case(
        "profile/sandbox-class-walk",
        "profile",
        profile_case("description: {{ ''.__class__.__mro__[1].__subclasses__() }}\n" + PROFILE_HEAD),
        r"p\.yaml\.j2:1: .*sandbox",
    ),
    Case(
        "profile/sandbox-popen",
        "profile",
        profile_case("description: {{ cycler.__init__.__globals__.os.popen('touch /tmp/h12-pwned').read() }}\n"),
        r"p\.yaml\.j2:1: .*sandbox",
    ),
    Case(
        "profile/sandbox-mutate-facts",
        "profile",
        profile_case("{{ vars.update({'x': 1}) }}\n" + PROFILE_HEAD),
        r"p\.yaml\.j2:1: .*sandbox",
    ),
    Case(
        "profile/sandbox-list-append",
        "profile",
        profile_case("{{ groups.append('admin') }}\n" + PROFILE_HEAD),
        r"p\.yaml\.j2:1: .*sandbox",
    ),
    Case(
        "profile/sandbox-format-attr",
        "profile",
        profile_case("description: {{ '{0.__class__}'.format(1) }}\n" + PROFILE_HEAD),
        r"p\.yaml\.j2:1: .*sandbox",
    ),
    Case(
        "profile/undefined-fact",
        "profile",
        profile_case("settings:\n  iommu: {{ no_such_fact }}\n"),
        r"p\.yaml\.j2:2: template uses an undefined value",
    ),
    Case(
        "profile/syntax", "profile", profile_case("settings:\n  iommu: {{ true \n"), r"p\.yaml\.j2:\d+: template syntax"
    ),
    Case(
        "profile/unknown-setting",
        "profile",
        profile_case(PROFILE_HEAD + "  iommuu: true\n"),
        r"unknown key 'settings\.iommuu'.*did you mean 'iommu'",
    ),
    Case("profile/bad-enum", "profile", profile_case("settings:\n  pcie_aspm: l2\n"), r"allowed values"),
    Case("profile/not-a-mapping", "profile", profile_case("- a\n- b\n"), r"must render to a mapping"),
    Case(
        "profile/python-tag",
        "profile",
        profile_case("settings: !!python/name:os.system\n"),
        r"(tag|could not determine)",
    ),
    Case("profile/markup-in-key", "profile", profile_case(PROFILE_HEAD + "  '[/b]x': 1\n"), r"\[/b\]x"),
    Case(
        "profile/missing-file",
        "profile",
        lambda tmp: cli(
            "bios-render",
            "--inventory",
            str(_write(tmp, "inv.yaml", INVENTORY)),
            "--profile",
            str(tmp / "nope.yaml.j2"),
        ),
        r"nope\.yaml\.j2 does not exist",
    ),
]

VENDOR_MAP_CASES = [
    Case(
        "vendor-map/duplicate-setting",
        "vendor-map",
        vendor_map_case(
            "settings:\n  iommu: {attribute: A, values: {true: E}, source: s}\n"
            "  iommu: {attribute: B, values: {true: E}, source: s}\n"
        ),
        r"dell\.yaml:3: (vendor map: )?duplicate key 'iommu'",
        code=2,
    ),
    Case("vendor-map/alias-bomb", "vendor-map", vendor_map_case(BOMB), r"expands to more than", code=2),
    Case(
        "vendor-map/syntax",
        "vendor-map",
        vendor_map_case("settings: [\n"),
        r"dell\.yaml:\d: vendor map( is not valid YAML|: YAML syntax error)",
        code=2,
    ),
    Case(
        "vendor-map/python-tag",
        "vendor-map",
        vendor_map_case("settings: !!python/name:os.system\n"),
        r"dell\.yaml:1: .*(tag|could not determine)",
        code=2,
    ),
]


def _secret_file(tmp: Path, mode: int, content: str = PASSWORD) -> Path:
    p = tmp / "pw"
    p.write_text(content)
    p.chmod(mode)
    return p


def secret_case(make_ref) -> Callable:
    """bios-plan resolves the BMC password before any connection; the BMC URL is unroutable on purpose."""

    def run(tmp: Path) -> Outcome:
        ref = make_ref(tmp)
        inv = _write(tmp, "inv.yaml", INVENTORY.replace("'env:NF_FAULT_BMC_PW'", repr(ref)))
        return cli("bios-plan", "--inventory", str(inv), "--json", str(tmp / "r.json"), report=tmp / "r.json")

    return run


SECRET_CASES = [
    Case(
        "secrets/file-dev-zero",
        "secrets",
        secret_case(lambda tmp: "file:/dev/zero"),
        r"/dev/zero.*not a regular file",
        secrets=(PASSWORD,),
    ),
    Case("secrets/file-directory", "secrets", secret_case(lambda tmp: f"file:{tmp}"), r"not a regular file|directory"),
    Case(
        "secrets/file-missing",
        "secrets",
        secret_case(lambda tmp: f"file:{tmp}/nope"),
        r"nope.*(No such file|not found)",
    ),
    Case(
        "secrets/file-world-readable",
        "secrets",
        secret_case(lambda tmp: f"file:{_secret_file(tmp, 0o644)}"),
        r"readable by others.*chmod 600",
        secrets=(PASSWORD,),
    ),
    Case(
        "secrets/file-group-readable",
        "secrets",
        secret_case(lambda tmp: f"file:{_secret_file(tmp, 0o640)}"),
        r"readable by (its group|others).*chmod 600",
        secrets=(PASSWORD,),
    ),
    Case(
        "secrets/file-too-big",
        "secrets",
        secret_case(lambda tmp: f"file:{_secret_file(tmp, 0o600, 'x' * 100_000)}"),
        r"bytes.*limit",
    ),
    Case(
        "secrets/env-unset",
        "secrets",
        secret_case(lambda tmp: "env:NF_FAULT_NOT_SET_ANYWHERE"),
        r"NF_FAULT_NOT_SET_ANYWHERE is not set",
    ),
]


def cases() -> list[Case]:
    return _inventory_cases() + YAML_CASES + PROFILE_CASES + VENDOR_MAP_CASES + SECRET_CASES
