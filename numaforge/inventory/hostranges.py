"""Ansible host patterns in inventories: `name`, `name:port`, `[v6addr]:port` and the ranges `db[01:10]`,
`x[a:f]`, `n[1:9:2]`, expanded as Ansible expands them (with a cap on how many hosts one pattern may make)."""

from __future__ import annotations

import re
import string

from ..errors import InventoryError

MAX_RANGE_HOSTS = 100_000  # hosts one `name[a:b]` pattern may expand to
_HOST_PORT_RE = re.compile(r"^((?:[^:\[\]]|\[[^\]]*\])+):(\d+)$")
_IPV6_PORT_RE = re.compile(r"^\[([0-9a-fA-F:.]+)\](?::(\d+))?$")


def expand_host_pattern(pattern, where: str) -> tuple[list[str], int | None]:
    """`name`, `name:port`, `[v6addr]:port`, and ranges `db[01:10]`, `x[a:f]`, `n[1:9:2]` -> names, port."""
    if not isinstance(pattern, str):
        raise InventoryError(f"host name {pattern!r} must be a string", where, 'quote it, e.g. "10"')
    port = None
    name = pattern.strip()
    m6 = _IPV6_PORT_RE.match(name)
    m = _HOST_PORT_RE.match(name)
    if m6:
        name, port = m6.group(1), int(m6.group(2)) if m6.group(2) else None
        return [name], port
    if m:
        name, port = m.group(1), int(m.group(2))
    if "[" not in name:
        check_name(name, where, "host")
        return [name], port
    names = _expand_ranges(name, where)
    for n in names:
        check_name(n, where, "host")
    return names, port


def _expand_ranges(name: str, where: str) -> list[str]:
    out: list[str] = []
    todo = [name]
    while todo:
        item = todo.pop(0)
        if "[" not in item:
            out.append(item)
            continue
        head, _, rest = item.partition("[")
        body, close, tail = rest.partition("]")
        if not close:
            raise InventoryError(f"host range in {name!r} has no closing ']'", where, "write name[01:10]")
        bounds = body.split(":")
        if len(bounds) not in (2, 3):
            raise InventoryError(
                f"host range [{body}] in {name!r} must be begin:end or begin:end:step",
                where,
                "write e.g. gpu[01:10] or gpu[1:10:2]",
            )
        beg, end = bounds[0] or "0", bounds[1]
        step_text = bounds[2] if len(bounds) == 3 else "1"
        if not end:
            raise InventoryError(f"host range [{body}] in {name!r} has no end", where, "write begin:end")
        try:
            step = int(step_text)
        except ValueError:
            raise InventoryError(
                f"host range step {step_text!r} in {name!r} is not a number",
                where,
                "write begin:end:step with a whole-number step",
            ) from None
        if step < 1:
            raise InventoryError(f"host range step {step} in {name!r} must be at least 1", where, "use a positive step")
        width = len(beg) if beg[0] == "0" and len(beg) > 1 else 0
        if width and len(end) != width:
            raise InventoryError(
                f"host range [{body}] in {name!r}: zero-padded begin and end must have the same width",
                where,
                f"write e.g. [{beg}:{end.zfill(width)}]",
            )
        letters = string.ascii_letters
        if beg in letters and end in letters and len(beg) == 1 and len(end) == 1:
            if letters.index(beg) > letters.index(end):
                raise InventoryError(f"host range [{body}] in {name!r} has begin after end", where, "swap them")
            seq: list[str] = list(letters[letters.index(beg) : letters.index(end) + 1 : step])
        else:
            try:
                b, e = int(beg), int(end)
            except ValueError:
                raise InventoryError(
                    f"host range [{body}] in {name!r} is neither numeric nor a letter range",
                    where,
                    "write e.g. [01:10] or [a:f]",
                ) from None
            if (e - b) // step + 1 + len(out) + len(todo) > MAX_RANGE_HOSTS:
                raise InventoryError(
                    f"host range [{body}] in {name!r} expands to more than {MAX_RANGE_HOSTS} hosts",
                    where,
                    "check the bounds; split very large fleets into several patterns",
                )
            seq = [str(i).zfill(width) if width else str(i) for i in range(b, e + 1, step)]
        todo = [f"{head}{s}{tail}" for s in seq] + todo
        if len(out) + len(todo) > MAX_RANGE_HOSTS:
            raise InventoryError(
                f"host pattern {name!r} expands to more than {MAX_RANGE_HOSTS} hosts", where, "check the bounds"
            )
    return out


HOST_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")
MAX_NAME_CHARS = 253  # a DNS name's limit; names also become lock and journal file names (255 bytes at most)


def too_long(name: str, where: str, kind: str) -> None:
    """A host or group name longer than MAX_NAME_CHARS is an InventoryError that gives the length and the limit."""
    if isinstance(name, str) and len(name) > MAX_NAME_CHARS:
        raise InventoryError(
            f"{kind} name too long ({len(name)} characters; the limit is {MAX_NAME_CHARS})",
            where,
            f"use a shorter {kind} name: a DNS name is at most {MAX_NAME_CHARS} characters "
            "(set the address with ansible_host / ssh.address and keep the inventory name short)",
        )


def check_name(name: str, where: str, kind: str) -> None:
    too_long(name, where, kind)
    if not isinstance(name, str) or not HOST_NAME_RE.match(name):
        raise InventoryError(
            f"{kind} name {name!r} is not valid",
            where,
            "use letters, digits, '.', '_', ':' and '-' (quote numeric names)",
        )
