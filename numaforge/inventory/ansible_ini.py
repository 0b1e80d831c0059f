"""Ansible INI inventories: `[group]`, `[group:vars]`, `[group:children]` (a child may be named before its own
section), `key=value` host and group variables read as Python literals where they are one, as Ansible does."""

from __future__ import annotations

import ast
import re
import shlex
import warnings

from ..errors import InventoryError
from .ansible_model import AnsibleInventory
from .hostranges import check_name, expand_host_pattern

SECTION_RE = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$")
_GROUPNAME_RE = re.compile(r"^([^:\]\s]+)\s*(?:#.*)?$")


def parse_ini(inv: AnsibleInventory, path: str, text: str) -> None:
    reader = _IniReader(inv)
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line and line[0] not in "#;":
            reader.line(line, f"{path}:{n}")
    reader.finish()


class _IniReader:
    """One INI file, line by line: the current section, and groups named before their own section."""

    def __init__(self, inv: AnsibleInventory):
        self.inv = inv
        self.pending: dict[str, dict] = {}  # groups named before their own section: {state, line, parents}
        self.group, self.state = "ungrouped", "hosts"

    def line(self, line: str, where: str) -> None:
        m = SECTION_RE.match(line)
        if m:
            self.section(m.group(1), m.group(2) or "hosts", where)
        elif line.startswith("[") and line.endswith("]"):
            raise InventoryError(
                f"invalid section header {line!r}",
                where,
                "write [group], [group:vars] or [group:children] with no spaces inside the brackets",
            )
        elif self.state == "hosts":
            self.host_line(line, where)
        elif self.state == "vars":
            if "=" not in line:
                raise InventoryError(
                    f"expected key=value in [{self.group}:vars], got {line!r}", where, "write name=value"
                )
            k, v = (e.strip() for e in line.split("=", 1))
            self.inv.set_var(self.group, k, ini_value(v), where, host=False)
        else:
            self.child_line(line, where)

    def section(self, group: str, state: str, where: str) -> None:
        inv, pending = self.inv, self.pending
        self.group, self.state = group, state
        if state not in ("hosts", "children", "vars"):
            raise InventoryError(
                f"section [{group}:{state}] has an unknown type '{state}'",
                where,
                "use [group], [group:vars] or [group:children]",
            )
        check_name(group, where, "group")
        if group not in inv.groups:
            if state == "vars" and group not in pending:
                pending[group] = {"state": "vars", "line": where, "parents": []}
            inv.add_group(group, where)
        if group in pending and state != "vars":
            if pending[group]["state"] == "children":
                _adopt(inv, group, pending)
            else:
                del pending[group]

    def host_line(self, line: str, where: str) -> None:
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError as exc:
            raise InventoryError(f"cannot parse the host line: {exc}", where, "balance the quotes") from None
        if not tokens:
            return
        if tokens[0].strip().endswith(":") or tokens[0].strip() == "---":
            raise InventoryError(
                f"invalid host pattern {tokens[0]!r}",
                where,
                "a trailing ':' needs a port; a '---' line means this file is YAML: name it .yaml",
            )
        names, port = expand_host_pattern(tokens[0], where)
        hvars = {}
        for tok in tokens[1:]:
            if "=" not in tok:
                raise InventoryError(
                    f"expected key=value after the host name, got {tok!r}",
                    where,
                    "write host vars as name=value (quote values containing spaces)",
                )
            k, v = tok.split("=", 1)
            hvars[k] = ini_value(v)
        for hname in names:
            self.inv.add_host(hname, self.group, where, port)
            for k, v in hvars.items():
                self.inv.set_var(hname, k, v, where, host=True)

    def child_line(self, line: str, where: str) -> None:
        m = _GROUPNAME_RE.match(line)
        if not m:
            raise InventoryError(
                f"expected a group name in [{self.group}:children], got {line!r}", where, "list one group name per line"
            )
        child = m.group(1)
        if child in self.inv.groups:
            self.inv.add_child(self.group, child)
        elif child in self.pending:
            self.pending[child]["parents"].append(self.group)
        else:
            self.pending[child] = {"state": "children", "line": where, "parents": [self.group]}

    def finish(self) -> None:
        for name, decl in self.pending.items():
            if decl["state"] == "vars":
                raise InventoryError(
                    f"section [{name}:vars] is for a group that is never defined",
                    decl["line"],
                    f"add a [{name}] or [{name}:children] section, or remove the vars",
                )
            raise InventoryError(
                f"[{decl['parents'][-1]}:children] names group '{name}', which is never defined",
                decl["line"],
                f"add a [{name}] section (it may come later in the file)",
            )


def _adopt(inv: AnsibleInventory, group: str, pending: dict) -> None:
    todo = [group]
    while todo:
        g = todo.pop()
        decl = pending.pop(g, None)
        if decl is None:
            continue
        for parent in decl["parents"]:
            inv.add_child(parent, g)
            if parent in pending and pending[parent]["state"] == "children":
                todo.append(parent)


def ini_value(text: str):
    """An INI value as Ansible reads it: a Python literal when it is one, otherwise the text."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    return _plain(value)


def _plain(value):
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if value is ...:
        return "..."
    if isinstance(value, complex):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return value
