"""Ansible inventories as Ansible reads them: YAML and INI sources, group_vars/ and host_vars/ beside the
source, host ranges, groups in any order, and the variable precedence of Ansible's variable manager.

Semantics follow Ansible's documentation ("How to build your inventory", "Variable precedence: where should I
put a variable?", docs.ansible.com) and are checked against `ansible-inventory --list` by
tests/inventory/test_ansible_conformance.py; no Ansible code is used here. In short:

- every top-level key of a YAML inventory is a group; a group may appear any number of times (as a top-level
  key or as a child) and each appearance adds hosts, children and vars; a host listed in several places is one
  host whose vars are the union (a later definition of the same variable wins);
- INI: `[group]`, `[group:vars]`, `[group:children]`; a child section may name a group defined further down;
  values are Python literals where they parse as one (`port=22` is 22), else strings;
- `host[01:10]`, `host[a:f]`, `host[1:10:2]` expand; `host:2222` sets ansible_port;
- groups without a parent are children of `all`; hosts in no group are in `ungrouped`;
- a host's variables, lowest first: `all` vars from the inventory -> its other groups' inventory vars (by depth,
  then ansible_group_priority, then name) -> group_vars/all -> group_vars/<group> (same order) -> the host's
  inventory vars -> host_vars/<host>. A higher layer replaces a whole variable (no dict merge), as Ansible does
  by default.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from .. import yamlsrc
from ..errors import InventoryError
from ..secrets import SecretText
from .ansible_ini import SECTION_RE, parse_ini
from .ansible_model import AnsibleInventory
from .hostranges import check_name, expand_host_pattern
from .vault import Vault, is_vault_text, require
from .yamlsrc import TAGS, LMap, LSeq, parse_yaml

MAX_INVENTORY_BYTES = yamlsrc.MAX_BYTES  # one inventory or vars file (the YAML reader's own limit)
VARS_EXTENSIONS = (".yml", ".yaml", ".json")
GROUP_KEYS = ("hosts", "children", "vars")


def read_regular(path: str | Path, what: str = "inventory file", limit: int = MAX_INVENTORY_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes (numaforge.yamlsrc.read_limited: no devices,
    FIFOs or oversized files, refused before a byte is read); a directory gets a hint at the file inside."""
    if os.path.isdir(path):
        raise InventoryError(f"{what} path is a directory", str(path), _dir_fix(path, what))
    return yamlsrc.read_limited(
        path,
        error=InventoryError,
        what=what,
        max_bytes=limit,
        fix_missing="check the path"
        if what != "inventory file"
        else "pass an existing file with --inventory, or create inventory/lab.yaml",
    )


def _dir_fix(path, what) -> str:
    if what != "inventory file":
        return f"pass a {what} file"
    try:
        names = sorted(p.name for p in Path(path).iterdir() if p.is_file() and not p.name.startswith("."))[:5]
    except OSError:
        names = []
    hint = f" (this directory holds: {', '.join(names)})" if names else ""
    return f"pass the inventory file inside it with --inventory, e.g. {Path(path) / 'hosts'}{hint}"


def is_ini(path: str, text: str) -> bool:
    """INI by extension, YAML by extension; otherwise by the first meaningful line, as people write them."""
    suffix = Path(path).suffix.lower()
    if suffix in (".yml", ".yaml", ".json"):
        return False
    if suffix in (".ini", ".cfg"):
        return True
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;" or line == "---":
            continue
        if SECTION_RE.match(line):
            return True
        return not (line.endswith(":") or ": " in line or line.startswith(("{", "-")))
    return False


def load(path: str, text: str, yaml_doc: LMap | None, vault: Vault | None = None) -> AnsibleInventory:
    """Build the Ansible view of an inventory file (YAML document already parsed, or INI text); ``vault``
    decrypts vault-encrypted group_vars/host_vars files (a `!vault` value stays encrypted: numaforge.inventory.
    from_ansible decrypts what a host's values need)."""
    inv = AnsibleInventory(path=path)
    inv.add_group("all", path)  # both exist before parsing, as in Ansible: [all:vars] is valid
    inv.add_group("ungrouped", path)
    if yaml_doc is None:
        parse_ini(inv, path, text)
    else:
        _parse_yaml(inv, path, yaml_doc)
    inv.reconcile()
    _load_vars_dirs(inv, Path(path).resolve().parent, vault)
    return inv


# ---------------------------------------------------------------------------------------------- YAML


def _parse_yaml(inv: AnsibleInventory, path: str, doc: LMap) -> None:
    at = lambda line: f"{path}:{line}"
    if "plugin" in doc:
        raise InventoryError(
            "this is an Ansible inventory plugin configuration, not an inventory",
            at(doc.line_of("plugin")),
            "dump it with `ansible-inventory -i FILE --list -y > static.yaml` and pass that file",
        )

    def group(name, body, line: int) -> str:
        where = at(line)
        if not isinstance(name, str):
            raise InventoryError(f"group name {name!r} must be a string", where, "quote the name")
        check_name(name, where, "group")
        if body is not None and not isinstance(body, LMap):
            raise InventoryError(
                f"Ansible group '{name}' must be a mapping (hosts:/children:/vars:), got a {_kind(body)}",
                where,
                "indent its hosts:, children: and vars: under it",
            )
        inv.add_group(name, where)
        gbody: LMap = body if body is not None else LMap()
        for key, value in gbody.items():
            kline = gbody.line_of(key)
            if key not in ("hosts", "children", "vars"):
                close = difflib.get_close_matches(str(key), GROUP_KEYS, n=1)
                raise InventoryError(
                    f"unknown key '{key}' in Ansible group '{name}'",
                    at(kline),
                    (f"did you mean '{close[0]}'? " if close else "")
                    + "(allowed: hosts, children, vars; a group's variables go under vars:)",
                )
            if isinstance(value, str):
                value = _lmap({value: None}, kline)
            if value is None:
                continue
            if not isinstance(value, LMap):
                raise InventoryError(
                    f"Ansible group '{name}' {key} must be a mapping, got a {_kind(value)}",
                    at(kline),
                    f"write `{key}:` as indented `name:` entries",
                )
            if key == "vars":
                for var in value:
                    inv.set_var(name, var, value[var], at(value.line_of(var)), host=False)
            elif key == "children":
                for child in value:
                    group(child, value[child], value.line_of(child))
                    inv.add_child(name, child)
            else:
                for pattern in value:
                    pline = value.line_of(pattern)
                    hvars = value[pattern]
                    if hvars is not None and not isinstance(hvars, LMap):
                        raise InventoryError(
                            f"vars of host '{pattern}' must be a mapping, got a {_kind(hvars)}",
                            at(pline),
                            "write `host: {var: value}` or leave it empty",
                        )
                    names, port = expand_host_pattern(pattern, at(pline))
                    for hname in names:
                        inv.add_host(hname, name, at(pline), port)
                        hv: LMap = hvars if hvars is not None else LMap()
                        for var in hv:
                            inv.set_var(hname, var, hv[var], at(hv.line_of(var)), host=True)
        return name

    for key in doc:
        group(key, doc[key], doc.line_of(key))


def _lmap(d: dict, line: int) -> LMap:
    m = LMap(d)
    m.line, m.key_lines = line, {k: line for k in d}
    return m


def _kind(v) -> str:
    return {LMap: "mapping", LSeq: "list", bool: "boolean", int: "number", float: "number", str: "string"}.get(
        type(v), type(v).__name__
    )


# ---------------------------------------------------------------------------------------------- vars dirs


def _load_vars_dirs(inv: AnsibleInventory, base: Path, vault: Vault | None) -> None:
    for sub, names, target in (
        ("group_vars", list(inv.groups), inv.group_files),
        ("host_vars", list(inv.hosts), inv.host_files),
    ):
        d = base / sub
        if not d.is_dir():
            continue
        for name in names:
            files = vars_files(d, name)
            loaded = []
            for f in files:
                data = _load_vars_file(f, vault)
                if data:
                    loaded.append((data, str(f)))
            if loaded:
                target[name] = loaded


def vars_files(directory: Path, name: str) -> list[Path]:
    """group_vars/NAME, NAME.yml, NAME.yaml, NAME.json (first that exists), or every file under NAME/ sorted."""
    for ext in ("",) + VARS_EXTENSIONS:
        p = directory / f"{name}{ext}"
        if p.is_dir():
            return _dir_files(p)
        if p.exists():
            return [p]
    return []


def _dir_files(d: Path) -> list[Path]:
    out: list[Path] = []
    for child in sorted(d.iterdir(), key=lambda p: p.name):
        if child.name.startswith(".") or child.name.endswith("~"):
            continue
        if child.is_dir() and not child.suffix:
            out.extend(_dir_files(child))
        elif child.is_file() and (not child.suffix or child.suffix in VARS_EXTENSIONS):
            out.append(child)
    return out


def _load_vars_file(path: Path, vault: Vault | None) -> LMap | None:
    text = read_regular(path, "vars file")
    encrypted = is_vault_text(text)
    if encrypted:  # a whole vault-encrypted vars file: every string in it is a secret
        text = require(vault, str(path), "this vars file").decrypt(text, str(path))
    doc = yamlsrc.parse(text, str(path), error=InventoryError, tags=TAGS)
    if encrypted and isinstance(doc, LMap):
        for k in doc:
            doc[k] = secret_strings(doc[k], f"{path}:{doc.line_of(k)}")
    if doc is None:
        return None  # Ansible ignores an empty vars file
    if not isinstance(doc, LMap):
        raise InventoryError(
            f"a vars file must hold a mapping of variables, got a {_kind(doc)}",
            f"{path}:{getattr(doc, 'line', 1)}",
            "write `name: value` lines",
        )
    for k in doc:
        if not isinstance(k, str):
            raise InventoryError(f"variable name {k!r} must be a string", f"{path}:{doc.line_of(k)}", "quote the name")
    return doc


def secret_strings(value, where: str):
    """Every string in ``value`` (from a vault-encrypted file) as a SecretText, the structure kept."""
    if isinstance(value, str):
        return SecretText(value, where)
    if isinstance(value, LMap):
        for k in value:
            value[k] = secret_strings(value[k], where)
    elif isinstance(value, LSeq):
        value[:] = [secret_strings(v, where) for v in value]
    return value


def read_text(path: str, vault: Vault | None) -> str:
    """An inventory file's text; a vault-encrypted inventory file is decrypted (lines count in its plaintext)."""
    text = read_regular(path)
    if is_vault_text(text):
        text = require(vault, path, "this inventory file").decrypt(text, path)
    return text


def read(path: str | Path, vault: Vault | None = None) -> AnsibleInventory:
    """Read an Ansible inventory file (YAML, JSON or INI, told apart as load_inventory does)."""
    path = str(path)
    text = read_text(path, vault)
    if is_ini(path, text):
        return load(path, text, None)
    doc = parse_yaml(text, path)
    if not isinstance(doc, LMap):
        raise InventoryError(
            f"an Ansible YAML inventory must be a mapping of groups, got a {_kind(doc)}",
            f"{path}:{getattr(doc, 'line', 1)}",
            "start with `all:`",
        )
    return load(path, text, doc, vault)
