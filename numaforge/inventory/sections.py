"""Host sections (ssh, bmc, kernel, hardware, bios_profile): merged key by key across a host's layers and
checked value by value, each error naming the line the value came from."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..errors import InventoryError, SecretError
from ..secrets import SecretRef, SecretText, url_has_credentials
from ..textsafe import has_control, printable
from .context import BMC_AUTH, PCI_RE, PROFILE_RE, RELEASE_RE, SECTION_FIELDS, TARGET_RE, VENDORS, Ctx, hint, kind_of
from .model import BMCSpec, HardwareSpec, Host, KernelSpec, SSHSpec
from .vault import Vaulted, require
from .yamlsrc import LMap, LSeq


def resolve_sections(ctx: Ctx, host: Host, layers: list[LMap]) -> None:
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

    host.sources = {f"{sec}.{k}": ctx.at(line) for sec, fs in merged.items() for k, (_v, line) in fs.items()}
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
    value = reveal(ctx, value, vline, f"host '{host}': {section}.{key}")
    tnames = {str: "a string", int: "an integer", bool: "true or false", list: "a list"}
    ok = isinstance(value, types) and not (types in (int, (int,)) and isinstance(value, bool))
    if types is int and isinstance(value, bool):
        ok = False
    if not ok:
        want = " or ".join(tnames[t] for t in (types if isinstance(types, tuple) else (types,)))
        ctx.fail(
            vline,
            f"host '{host}': {section}.{key} must be {want}, got {kind_of(value)} ({value!r})",
            f"set {section}.{key} to {want}",
        )
    if isinstance(value, str) and has_control(value):  # a NUL in a user name, an escape sequence in an address
        ctx.fail(
            vline,
            f"host '{host}': {section}.{key} contains a control character ('{printable(value)}')",
            f"write {section}.{key} without control characters (NUL, escape, newline...): "
            "check how the value was generated",
        )
    return value


def reveal(ctx: Ctx, value, line, what: str):
    """A `!vault` value decrypted with the run's vault password (an error naming it when none was given)."""
    if isinstance(value, Vaulted):
        return require(ctx.vault, ctx.at(line), what).decrypt(value.ciphertext, value.where)
    return value


def _path(ctx: Ctx, value: str | None) -> str | None:
    if value is None:
        return None
    if value.startswith("~") or Path(value).is_absolute():
        return value
    return str((ctx.base / value).resolve())


def _secret(ctx, fields, key, host, section):
    if key not in fields or fields[key][0] is None:
        return None
    value, line = fields[key]
    value = reveal(ctx, value, line, f"host '{host}': {section}.{key}")
    if isinstance(value, SecretText):  # an Ansible Vault value: a secret in hand, never printed
        return SecretRef("vault", str(value), value.where or ctx.at(line))
    if not isinstance(value, str):
        ctx.fail(
            line,
            f"host '{host}': {section}.{key} must be a reference string, got {kind_of(value)}",
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
    if not address.strip() or any(c.isspace() for c in address):
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
    if url_has_credentials(url):
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
    if parsed.query or parsed.fragment or parsed.params:
        tail = ";" + parsed.params if parsed.params else ("?" + parsed.query if parsed.query else "")
        tail += "#" + parsed.fragment if parsed.fragment else ""
        ctx.fail(
            uline,
            f"host '{host}': bmc.url must not carry a query or fragment ({tail})",
            "give only scheme://host[:port]; numaforge builds every Redfish request path itself",
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
        ctx.fail(f["vendor"][1], f"host '{host}': bmc.vendor {vendor!r} is not known", hint(vendor, VENDORS))
    username = _get(ctx, f, "username", str, host, "bmc", default="root")
    password = _secret(ctx, f, "password", host, "bmc")
    if password is None:
        ctx.fail(
            line, f"host '{host}': bmc.password is required", "add `password: env:VARIABLE` or `password: file:PATH`"
        )
    system_id = _get(ctx, f, "system_id", str, host, "bmc")
    auth = _get(ctx, f, "auth", str, host, "bmc", default="auto")
    if auth not in BMC_AUTH:
        ctx.fail(f["auth"][1], f"host '{host}': bmc.auth {auth!r} is not known", hint(auth, BMC_AUTH))
    return BMCSpec(
        url=url.rstrip("/"),
        username=username,
        password=password,
        ca_bundle=_path(ctx, ca),
        vendor=vendor,
        system_id=system_id,
        insecure=insecure,
        auth=auth,
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
        ctx.fail(f["vendor"][1], f"host '{host}': hardware.vendor {vendor!r} is not known", hint(vendor, VENDORS[1:]))
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
