"""Inventory loaders: numaforge's native YAML and Ansible YAML inventories, with file:line errors.

Both formats end up as the same model (numaforge/inventory/model.py). Resolution order for variables and
host sections, lowest first: top-level ``vars``/``defaults`` (Ansible: ``all.vars``) -> groups by depth
(outer before inner; same depth by name, as Ansible does) -> the host itself. The format reference is
docs/inventory.md.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..errors import InventoryError, SecretError
from ..secrets import SecretRef
from ..textsafe import has_control
from . import ansible
from .graph import nesting_depths
from .model import BMCSpec, Group, HardwareSpec, Host, Inventory, KernelSpec, Location, SSHSpec
from .yamlsrc import LMap, LSeq, parse_yaml

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
PROFILE_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
TARGET_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
PCI_RE = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
RELEASE_RE = re.compile(r"^\d+\.\d+(\.\d+)?([-+~][A-Za-z0-9_.+~-]+)?$")
VENDORS = ("auto", "dell", "hpe", "supermicro", "lenovo", "generic")

TOP_KEYS = ("version", "vars", "defaults", "hosts", "groups")
SECTION_KEYS = ("ssh", "bmc", "kernel", "hardware", "bios_profile")
HOST_KEYS = (*SECTION_KEYS, "vars")
GROUP_KEYS = ("hosts", "children", "vars", *SECTION_KEYS)
SSH_KEYS = ("address", "port", "user", "key_file", "agent", "known_hosts", "sudo", "password", "config_file")
BMC_KEYS = ("url", "username", "password", "ca_bundle", "vendor", "system_id", "insecure")
KERNEL_KEYS = ("release", "target")
HARDWARE_KEYS = ("platform", "vendor", "sockets", "cpu_model", "gpus", "nics")
SECTION_FIELDS = {"ssh": SSH_KEYS, "bmc": BMC_KEYS, "kernel": KERNEL_KEYS, "hardware": HARDWARE_KEYS}

ANSIBLE_SSH_VARS = {
    "ansible_host": "address",
    "ansible_ssh_host": "address",
    "ansible_port": "port",
    "ansible_ssh_port": "port",
    "ansible_user": "user",
    "ansible_ssh_user": "user",
    "ansible_ssh_private_key_file": "key_file",
    "ansible_private_key_file": "key_file",
    "ansible_become": "sudo",
    "ansible_password": "password",
    "ansible_ssh_pass": "password",
}


# words people bring from other tools (ssh_config, Ansible, Redfish docs) -> our key
SYNONYMS = {
    "hostname": "address",
    "host": "address",
    "ip": "address",
    "addr": "address",
    "username": "user",
    "identity_file": "key_file",
    "identityfile": "key_file",
    "private_key": "key_file",
    "become": "sudo",
    "version": "release",
    "uname": "release",
    "kernel_release": "release",
    "members": "hosts",
    "subgroups": "children",
    "endpoint": "url",
    "address_url": "url",
    "cafile": "ca_bundle",
    "ca": "ca_bundle",
    "verify": "insecure",
    "profile": "bios_profile",
}


def _hint(word: str, choices) -> str:
    choices = list(choices)
    syn = SYNONYMS.get(str(word).lower())
    close = [syn] if syn in choices else difflib.get_close_matches(str(word), choices, n=1, cutoff=0.6)
    allowed = ", ".join(choices)
    return f"did you mean '{close[0]}'? (allowed: {allowed})" if close else f"allowed keys: {allowed}"


class _Ctx:
    """Per-load context: the file name (for errors) and options."""

    def __init__(self, path: str, allow_plaintext: bool):
        self.path = path
        self.base = Path(path).resolve().parent
        self.allow_plaintext = allow_plaintext

    def at(self, line: int | str | None) -> str:
        if isinstance(line, str):  # already file:line (Ansible inventories: group_vars/host_vars files)
            return line
        return f"{self.path}:{line}" if line else self.path

    def fail(self, line, what, fix=None):
        raise InventoryError(what, self.at(line), fix)

    def expect_map(self, value, line, what):
        if not isinstance(value, LMap):
            self.fail(
                line or getattr(value, "line", None),
                f"{what} must be a mapping (key: value), got {_kind(value)}",
                f"write {what} as indented `key: value` lines",
            )
        return value

    def check_keys(self, m: LMap, allowed, what):
        for key in m:
            if not isinstance(key, str):
                self.fail(m.line_of(key), f"{what}: key {key!r} must be a string", "quote the key")
            if key not in allowed:
                self.fail(m.line_of(key), f"unknown key '{key}' in {what}", _hint(key, allowed))


def _kind(v) -> str:
    if v is None:
        return "nothing (empty value)"
    return {
        LMap: "a mapping",
        LSeq: "a list",
        dict: "a mapping",
        list: "a list",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
    }.get(type(v), type(v).__name__)


def load_inventory(path: str | Path, allow_plaintext_secrets: bool = False) -> Inventory:
    """Load and validate an inventory; raises InventoryError (file:line, what, fix) on any problem.

    The file must be a regular file (no device, FIFO or directory) of at most yamlsrc.MAX_BYTES (4 MiB). Native YAML (`hosts:` at
    the top), Ansible YAML (groups at the top, usually `all:`) and Ansible INI are told apart by their shape.
    """
    path = str(path)
    text = ansible.read_regular(path)
    ctx = _Ctx(path, allow_plaintext_secrets)
    if ansible.is_ini(path, text):
        return _from_ansible(ansible.load(path, text, None), ctx)
    doc = parse_yaml(text, path)
    if not isinstance(doc, LMap):
        ctx.fail(
            getattr(doc, "line", 1),
            f"the inventory must be a mapping at the top, got {_kind(doc)}",
            "start with `hosts:` (native) or `all:` (Ansible YAML); see docs/inventory.md",
        )
    if "all" in doc or not any(k in doc for k in TOP_KEYS):
        return _from_ansible(ansible.load(path, text, doc), ctx)
    inv = _build(doc, ctx)
    inv.format = "native"
    return inv


# --------------------------------------------------------------------------------------------- native


def _build(doc: LMap, ctx: _Ctx) -> Inventory:
    ctx.check_keys(doc, TOP_KEYS, "the inventory top level")
    if "version" in doc and doc["version"] != 1:
        ctx.fail(doc.line_of("version"), f"unsupported inventory version {doc['version']!r}", "use `version: 1`")
    if "hosts" not in doc:
        ctx.fail(doc.line, "the inventory has no `hosts:` mapping", "add `hosts:` with at least one host")
    hosts_m = ctx.expect_map(doc["hosts"], doc.line_of("hosts"), "hosts")
    if not hosts_m:
        ctx.fail(doc.line_of("hosts"), "`hosts:` is empty", "add at least one host")
    top_vars = _vars(doc, ctx, "the top-level vars")
    defaults = LMap()
    defaults.line, defaults.key_lines = doc.line_of("defaults"), {}
    if "defaults" in doc:
        defaults = ctx.expect_map(doc["defaults"], doc.line_of("defaults"), "defaults")
        ctx.check_keys(defaults, SECTION_KEYS, "defaults")

    inv = Inventory(path=ctx.path)
    for name, body in hosts_m.items():
        line = hosts_m.line_of(name)
        _check_name(ctx, name, line, "host")
        if body is None:
            body = LMap()
            body.line, body.key_lines = line, {}
        body = ctx.expect_map(body, line, f"host '{name}'")
        ctx.check_keys(body, HOST_KEYS, f"host '{name}'")
        inv.hosts[name] = Host(name=name, location=Location(ctx.path, line))
        inv.hosts[name]._raw = body  # type: ignore[attr-defined]

    groups_m = LMap()
    groups_m.line, groups_m.key_lines = doc.line_of("groups"), {}
    if "groups" in doc and doc["groups"] is not None:
        groups_m = ctx.expect_map(doc["groups"], doc.line_of("groups"), "groups")
    for gname, body in groups_m.items():
        line = groups_m.line_of(gname)
        _check_name(ctx, gname, line, "group")
        if gname in inv.hosts:
            ctx.fail(
                line,
                f"group '{gname}' has the same name as a host (defined on line {inv.hosts[gname].location.line})",
                "rename the group or the host: --limit could not tell them apart",
            )
        if body is None:
            body = LMap()
            body.line, body.key_lines = line, {}
        body = ctx.expect_map(body, line, f"group '{gname}'")
        ctx.check_keys(body, GROUP_KEYS, f"group '{gname}'")
        g = Group(name=gname, location=Location(ctx.path, line))
        for key, target in (("hosts", g.hosts), ("children", g.children)):
            if key in body and body[key] is not None:
                seq = body[key]
                if isinstance(seq, LMap):  # Ansible-style `hosts: {a: , b: }` is accepted
                    items = [(k, seq.line_of(k)) for k in seq]
                elif isinstance(seq, LSeq):
                    items = [(v, seq.line_of(i)) for i, v in enumerate(seq)]
                else:
                    ctx.fail(
                        body.line_of(key),
                        f"group '{gname}': `{key}` must be a list of names, got {_kind(seq)}",
                        f"write `{key}: [name1, name2]`",
                    )
                for item, iline in items:
                    if not isinstance(item, str):
                        ctx.fail(iline, f"group '{gname}': {key} entry {item!r} is not a name", "quote the name")
                    if item in target:
                        ctx.fail(iline, f"group '{gname}' lists '{item}' twice in `{key}`", "remove the duplicate")
                    target.append(item)
                    g._lines = getattr(g, "_lines", {})  # type: ignore[attr-defined]
                    g._lines[(key, item)] = iline  # type: ignore[attr-defined]
        g.vars = dict(_vars(body, ctx, f"group '{gname}' vars"))
        g._raw = body  # type: ignore[attr-defined]
        inv.groups[gname] = g

    # references
    for g in inv.groups.values():
        lines = getattr(g, "_lines", {})
        for h in g.hosts:
            if h not in inv.hosts:
                ctx.fail(
                    lines[("hosts", h)],
                    f"group '{g.name}' references host '{h}', which is not defined",
                    _hint(h, inv.hosts) if inv.hosts else "define it under `hosts:`",
                )
        for c in g.children:
            if c not in inv.groups:
                ctx.fail(
                    lines[("children", c)],
                    f"group '{g.name}' has child group '{c}', which is not defined",
                    _hint(c, inv.groups) if inv.groups else "define it under `groups:`",
                )
    depth = _depths(inv, ctx)
    membership = {h: [] for h in inv.hosts}
    for g in inv.groups.values():
        for h in inv.group_members(g.name):
            membership[h].append(g.name)
    for name, host in inv.hosts.items():
        groups = sorted(membership[name], key=lambda gn: (depth[gn], gn))
        host.groups = groups
        layers: list[LMap] = [defaults] + [inv.groups[gn]._raw for gn in groups] + [host._raw]  # type: ignore
        resolved_vars: dict[str, Any] = dict(top_vars)
        for gn in groups:
            resolved_vars.update(inv.groups[gn].vars)
        resolved_vars.update(_vars(host._raw, ctx, f"host '{name}' vars"))  # type: ignore[attr-defined]
        host.vars = resolved_vars
        _resolve_sections(ctx, host, layers)
        del host._raw  # type: ignore[attr-defined]
    for g in inv.groups.values():
        for attr in ("_raw", "_lines"):
            if hasattr(g, attr):
                delattr(g, attr)
    return inv


def _check_name(ctx, name, line, kind):
    if not isinstance(name, str) or not NAME_RE.match(name):
        ctx.fail(
            line,
            f"{kind} name {name!r} is not valid",
            "use letters, digits, '.', '_' and '-', starting with a letter or digit (quote numeric names)",
        )


def _vars(m: LMap, ctx: _Ctx, what: str) -> dict:
    if "vars" not in m or m["vars"] is None:
        return {}
    v = ctx.expect_map(m["vars"], m.line_of("vars"), what)
    for key in v:
        if not isinstance(key, str):
            ctx.fail(v.line_of(key), f"{what}: variable name {key!r} must be a string", "quote the name")
    return dict(v)


def _depths(inv: Inventory, ctx: _Ctx) -> dict[str, int]:
    """Group depths (outer groups 1); a cycle or nesting deeper than graph.MAX_GROUP_DEPTH is an error."""
    return nesting_depths(
        {g.name: g.children for g in inv.groups.values()},
        {g.name: ctx.at(g.location.line) for g in inv.groups.values()},
    )


def _resolve_sections(ctx: _Ctx, host: Host, layers: list[LMap]) -> None:
    """Merge ssh/bmc/kernel/hardware key by key across layers, remembering each value's line."""
    merged: dict[str, dict[str, tuple[Any, int]]] = {s: {} for s in SECTION_FIELDS}
    section_line: dict[str, int] = {}
    profile: tuple[Any, int] | None = None
    for layer in layers:
        for section, fields in SECTION_FIELDS.items():
            if section in layer and layer[section] is not None:
                body = ctx.expect_map(layer[section], layer.line_of(section), f"{section} (host '{host.name}')")
                ctx.check_keys(body, fields, f"{section} section")
                section_line[section] = layer.line_of(section)
                for k, v in body.items():
                    merged[section][k] = (v, body.line_of(k))
        if "bios_profile" in layer:
            profile = (layer["bios_profile"], layer.line_of("bios_profile"))

    # Inherited defaults alone (a group's `bmc: {username: ...}`) do not give a host a BMC or an SSH side:
    # only a host whose layers provide the address/url has one; a host's own section must be complete.
    own = layers[-1]
    if merged["ssh"] and ("address" in merged["ssh"] or "ssh" in own):
        host.ssh = _ssh(ctx, host.name, merged["ssh"], section_line["ssh"])
    if merged["bmc"] and ("url" in merged["bmc"] or "bmc" in own):
        host.bmc = _bmc(ctx, host.name, merged["bmc"], section_line["bmc"])
    host.kernel = _kernel(ctx, host.name, merged["kernel"])
    host.hardware = _hardware(ctx, host.name, merged["hardware"])
    if profile is not None and profile[0] is not None:
        value, line = profile
        if not isinstance(value, str) or not PROFILE_RE.match(value):
            ctx.fail(
                line,
                f"host '{host.name}': bios_profile {value!r} is not a profile name",
                "name a file in bios/profiles/ without its .yaml.j2 suffix, e.g. epyc-gpudirect",
            )
        host.bios_profile = value
    if host.ssh is None and host.bmc is None and host.connection == "ssh":
        ctx.fail(
            str(host.location) if host.location.file != ctx.path else host.location.line,
            f"host '{host.name}' has neither `ssh:` nor `bmc:`",
            "give the host an ssh address (kernel pipeline) and/or a bmc url (firmware pipeline)",
        )


def _get(ctx, fields, key, types, host, section, default=None, required=False, line=None):
    if key not in fields or fields[key][0] is None:
        if required:
            ctx.fail(line, f"host '{host}': {section}.{key} is required", f"add `{key}:` under `{section}:`")
        return default
    value, vline = fields[key]
    tnames = {str: "a string", int: "an integer", bool: "true or false", list: "a list"}
    ok = isinstance(value, types) and not (types in (int, (int,)) and isinstance(value, bool))
    if types is int and isinstance(value, bool):
        ok = False
    if not ok:
        want = " or ".join(tnames[t] for t in (types if isinstance(types, tuple) else (types,)))
        ctx.fail(
            vline,
            f"host '{host}': {section}.{key} must be {want}, got {_kind(value)} ({value!r})",
            f"set {section}.{key} to {want}",
        )
    return value


def _path(ctx: _Ctx, value: str | None) -> str | None:
    if value is None:
        return None
    if value.startswith("~") or Path(value).is_absolute():
        return value
    return str((ctx.base / value).resolve())


def _secret(ctx, fields, key, host, section):
    if key not in fields or fields[key][0] is None:
        return None
    value, line = fields[key]
    if not isinstance(value, str):
        ctx.fail(
            line,
            f"host '{host}': {section}.{key} must be a reference string, got {_kind(value)}",
            "write env:VARIABLE or file:/path/to/secret",
        )
    try:
        ref = SecretRef.parse(value, where=ctx.at(line), allow_plaintext=ctx.allow_plaintext)
    except SecretError as exc:
        raise InventoryError(f"host '{host}': {section}.{key}: {exc.what}", ctx.at(line), exc.fix) from None
    if ref.kind == "file":  # file: references are relative to the inventory file, like every other path
        ref = SecretRef("file", _path(ctx, ref.value), ref.where)
    return ref


def _ssh(ctx, host, f, line) -> SSHSpec:
    address = _get(ctx, f, "address", str, host, "ssh", required=True, line=line)
    if not address.strip() or " " in address:
        ctx.fail(
            f["address"][1],
            f"host '{host}': ssh.address {address!r} is not a host name or IP address",
            "write a DNS name or an IP address",
        )
    port = _get(ctx, f, "port", int, host, "ssh", default=22)
    if not 1 <= port <= 65535:
        ctx.fail(f["port"][1], f"host '{host}': ssh.port {port} is out of range", "use a port from 1 to 65535")
    user = _get(ctx, f, "user", str, host, "ssh", default="root")
    if not re.match(r"^[a-z_][a-z0-9_.-]*\$?$", user):
        ctx.fail(
            f["user"][1],
            f"host '{host}': ssh.user {user!r} is not a valid user name",
            "use a POSIX user name such as root or deploy",
        )
    return SSHSpec(
        address=address,
        port=port,
        user=user,
        key_file=_path(ctx, _get(ctx, f, "key_file", str, host, "ssh")),
        use_agent=_get(ctx, f, "agent", bool, host, "ssh", default=True),
        known_hosts=_path(ctx, _get(ctx, f, "known_hosts", str, host, "ssh")),
        sudo=_get(ctx, f, "sudo", bool, host, "ssh", default=False),
        password=_secret(ctx, f, "password", host, "ssh"),
        config_file=_path(ctx, _get(ctx, f, "config_file", str, host, "ssh")),
    )


def _bmc(ctx, host, f, line) -> BMCSpec:
    url = _get(ctx, f, "url", str, host, "bmc", required=True, line=line)
    uline = f["url"][1]
    try:
        if has_control(url) or any(c.isspace() for c in url):
            raise ValueError("it contains a control character or white space")
        parsed = urlparse(url)
    except ValueError as exc:  # urlparse: "Invalid IPv6 URL" for a stray '[' -- was a crash (exit 70)
        ctx.fail(
            uline,
            f"host '{host}': bmc.url {url!r} is not a URL like https://bmc-host[:port] ({exc})",
            "write the BMC's base URL, e.g. https://10.0.0.5, https://[fd00::5] or https://bmc01.example.com:443",
        )
    if "@" in parsed.netloc:
        # never echo the URL: it holds a password. Say where, and how to move it out.
        ctx.fail(
            uline,
            f"host '{host}': bmc.url carries credentials (user:password@ before the host name); they "
            "would be printed and sent as basic auth on every request",
            "write only https://host[:port] and set bmc.username and bmc.password: env:VARIABLE or "
            "file:PATH (then change that BMC password: it has been stored in the inventory)",
        )
    try:
        port_ok = parsed.port is None or 0 < parsed.port < 65536
    except ValueError:
        port_ok = False
    if parsed.scheme not in ("https", "http") or not parsed.hostname or not port_ok:
        ctx.fail(
            uline,
            f"host '{host}': bmc.url {url!r} is not a URL like https://bmc-host[:port]",
            "write the BMC's base URL, e.g. https://10.0.0.5 or https://bmc01.example.com:443",
        )
    if parsed.path not in ("", "/"):
        ctx.fail(
            uline,
            f"host '{host}': bmc.url must not carry a path ({parsed.path!r})",
            "give only scheme://host[:port]; numaforge discovers /redfish/v1 itself",
        )
    insecure = _get(ctx, f, "insecure", bool, host, "bmc", default=False)
    if parsed.scheme == "http" and not insecure:
        ctx.fail(
            uline,
            f"host '{host}': bmc.url uses plain http, credentials would travel unencrypted",
            "use https (with ca_bundle), or set `insecure: true` explicitly if you accept the risk",
        )
    ca = _get(ctx, f, "ca_bundle", str, host, "bmc")
    if ca and insecure:
        ctx.fail(
            f["insecure"][1],
            f"host '{host}': bmc.insecure is true but a ca_bundle is also set",
            "remove `insecure: true` so the CA bundle is used to verify the BMC",
        )
    vendor = _get(ctx, f, "vendor", str, host, "bmc", default="auto")
    if vendor not in VENDORS:
        ctx.fail(f["vendor"][1], f"host '{host}': bmc.vendor {vendor!r} is not known", _hint(vendor, VENDORS))
    username = _get(ctx, f, "username", str, host, "bmc", default="root")
    password = _secret(ctx, f, "password", host, "bmc")
    if password is None:
        ctx.fail(
            line, f"host '{host}': bmc.password is required", "add `password: env:VARIABLE` or `password: file:PATH`"
        )
    system_id = _get(ctx, f, "system_id", str, host, "bmc")
    return BMCSpec(
        url=url.rstrip("/"),
        username=username,
        password=password,
        ca_bundle=_path(ctx, ca),
        vendor=vendor,
        system_id=system_id,
        insecure=insecure,
    )


def _kernel(ctx, host, f) -> KernelSpec:
    release = _get(ctx, f, "release", str, host, "kernel")
    if release is not None and not RELEASE_RE.match(release):
        ctx.fail(
            f["release"][1],
            f"host '{host}': kernel.release {release!r} does not look like `uname -r` output",
            "write the host's `uname -r`, e.g. 5.10.0-46-amd64",
        )
    target = _get(ctx, f, "target", str, host, "kernel")
    if target is not None and not TARGET_RE.match(target):
        ctx.fail(
            f["target"][1],
            f"host '{host}': kernel.target {target!r} is not a target name",
            "name a file in kpatch/targets/ without .yaml, e.g. lab",
        )
    return KernelSpec(release=release, target=target)


def _hardware(ctx, host, f) -> HardwareSpec:
    sockets = _get(ctx, f, "sockets", int, host, "hardware")
    if sockets is not None and not 1 <= sockets <= 16:
        ctx.fail(f["sockets"][1], f"host '{host}': hardware.sockets {sockets} is out of range", "use 1 to 16")
    vendor = _get(ctx, f, "vendor", str, host, "hardware")
    if vendor is not None and vendor not in VENDORS[1:]:
        ctx.fail(f["vendor"][1], f"host '{host}': hardware.vendor {vendor!r} is not known", _hint(vendor, VENDORS[1:]))
    pci: dict[str, list[str]] = {}
    for key in ("gpus", "nics"):
        items = _get(ctx, f, key, list, host, "hardware", default=[])
        for i, addr in enumerate(items):
            iline = items.line_of(i) if isinstance(items, LSeq) else f[key][1]
            if not isinstance(addr, str) or not PCI_RE.match(addr):
                ctx.fail(
                    iline,
                    f"host '{host}': hardware.{key}[{i}] {addr!r} is not a PCI address",
                    "write domain:bus:device.function, e.g. 0000:41:00.0 (as `lspci -D` prints it)",
                )
        pci[key] = [a.lower() for a in items]
    return HardwareSpec(
        platform=_get(ctx, f, "platform", str, host, "hardware"),
        vendor=vendor,
        sockets=sockets,
        cpu_model=_get(ctx, f, "cpu_model", str, host, "hardware"),
        gpus=pci["gpus"],
        nics=pci["nics"],
    )


# --------------------------------------------------------------------------------------------- Ansible

CONNECTIONS_SSH = ("ssh", "smart", "paramiko", "paramiko_ssh")
TEMPLATE_RE = re.compile(r"\{\{|\{%")


def _from_ansible(ainv: "ansible.AnsibleInventory", ctx: _Ctx) -> Inventory:
    """The numaforge model of an Ansible inventory: every host's variables resolved as Ansible resolves them,
    then read as numaforge sections (ansible_* SSH variables, numaforge_* sections)."""
    inv = Inventory(path=ctx.path, format="ansible")
    for name, h in ainv.hosts.items():
        values, where = ainv.resolve(name)
        host = Host(name=name, location=_location(h.where, ctx))
        host.groups = [g for g in ainv.host_groups(name) if g != "all"]
        layer, plain = _host_layer(ctx, name, h.where, values, where)
        conn = values.get("ansible_connection", "ssh")
        if not isinstance(conn, str) or not conn:
            ctx.fail(
                where.get("ansible_connection"),
                f"host '{name}': ansible_connection {conn!r} is not a name",
                "write ansible_connection: ssh (or local)",
            )
        host.connection = "ssh" if conn in CONNECTIONS_SSH else conn
        if host.connection != "ssh":
            layer.pop("ssh", None)  # a local (or winrm, docker...) host has no SSH side
        if isinstance(layer.get("bmc"), dict) and "url" not in layer["bmc"]:
            layer.pop("bmc")  # shared BMC settings (all/group vars) without a url: this host has no BMC
        host.vars = plain
        _resolve_sections(ctx, host, [layer])
        inv.hosts[name] = host
    for name, g in ainv.groups.items():
        if name == "all" or (name == "ungrouped" and not g.hosts):
            continue
        group_vars = dict(g.vars)
        for data, _fname in ainv.group_files.get(name, []):
            group_vars.update(data)
        inv.groups[name] = Group(
            name=name, location=_location(g.where, ctx), hosts=list(g.hosts), children=list(g.children), vars=group_vars
        )
    return inv


def _location(where: str, ctx: _Ctx) -> Location:
    file, _, line = where.rpartition(":")
    return Location(file, int(line)) if line.isdigit() else Location(where or ctx.path)


def _host_layer(ctx: _Ctx, host: str, host_where: str, values: dict, where: dict) -> tuple[LMap, dict]:
    """Resolved Ansible variables -> one native host layer (sections with the file:line of every value)
    and the plain variables (everything numaforge did not read as a section)."""
    layer = _lmap(host_where)
    plain: dict[str, Any] = {}
    flat: dict[str, list[tuple[str, str]]] = {}
    for key, value in values.items():
        if key in ANSIBLE_SSH_VARS or key == "ansible_connection":
            continue
        if key.startswith("numaforge_"):
            rest = key[len("numaforge_") :]
            if rest in SECTION_KEYS:
                if rest != "bios_profile" and value is not None and not isinstance(value, dict):
                    ctx.fail(
                        where.get(key),
                        f"host '{host}': {key} must be a mapping, got {_kind(value)}",
                        f"write {key}: {{key: value}}, or set single keys as {key}_KEY",
                    )
                _set(layer, rest, _as_lmap(value, where.get(key)) if isinstance(value, dict) else value, where.get(key))
                continue
            section = next((s for s in SECTION_FIELDS if rest.startswith(s + "_")), None)
            if section is None:
                ctx.fail(
                    where.get(key),
                    f"unknown numaforge variable '{key}'",
                    _hint(key, [f"numaforge_{s}" for s in SECTION_KEYS])
                    + "; single keys are numaforge_SECTION_KEY, e.g. numaforge_bmc_password",
                )
            flat.setdefault(section, []).append((rest[len(section) + 1 :], key))
            continue
        plain[key] = value
    # flat numaforge_<section>_<key> variables override that key of the section's mapping
    for section, keys in flat.items():
        body = layer.get(section)
        if not isinstance(body, LMap):
            body = _lmap(where.get(keys[0][1]))
        for field, key in keys:
            _set(body, field, values[key], where.get(key))
        _set(layer, section, body, layer.key_lines.get(section, body.line))
    ssh = layer.get("ssh")
    if not isinstance(ssh, LMap):
        ssh = _lmap(where.get("ansible_host") or host_where)
    done: set[str] = set()
    for var, fld in ANSIBLE_SSH_VARS.items():  # the current name of each variable comes first and wins
        if var not in values or fld in done:
            continue
        done.add(fld)
        value, vline = values[var], where.get(var)
        if isinstance(value, str) and TEMPLATE_RE.search(value):
            ctx.fail(
                vline,
                f"host '{host}': {var} is a Jinja2 template ({value!r}); numaforge does not evaluate "
                "inventory templates",
                f"write the value itself, e.g. {var}: 10.0.0.5",
            )
        if fld == "port" and isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if (
            fld == "sudo"
            and isinstance(value, str)
            and value.lower() in ("yes", "no", "true", "false", "on", "off", "1", "0")
        ):
            value = value.lower() in ("yes", "true", "on", "1")
        if fld in ("address", "user") and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        _set(ssh, fld, value, vline)
    if "address" not in ssh:
        _set(ssh, "address", host, ssh.line)  # Ansible connects to the inventory name without ansible_host
    _set(layer, "ssh", ssh, ssh.line)
    return layer, plain


def _as_lmap(value: dict, where) -> LMap:
    """A section mapping whose key lines are file:line strings (the file the mapping was written in)."""
    m = _lmap(where)
    file = where.rpartition(":")[0] if isinstance(where, str) else None
    for k, v in value.items():
        kline = value.line_of(k) if isinstance(value, LMap) else None
        _set(m, k, v, f"{file}:{kline}" if file and kline else where)
    return m


def _lmap(line) -> LMap:
    m = LMap()
    m.line, m.key_lines = line, {}
    return m


def _set(m: LMap, key, value, line):
    m[key] = value
    m.key_lines[key] = line
