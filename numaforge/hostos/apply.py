"""Apply a host OS plan, and roll it back: one root shell script per host, built here (pure) and run over SSH.

Order of an apply (``apply_script``), under ``set -e`` so the first failure stops it:

1. the previous values of everything about to change are saved on the host (``STATE_FILE``, JSON) -- before
   any other write, and merged with an earlier save so the values from before the *first* apply are kept;
2. the live values: /proc/sys, THP, governors, /proc/irq/N/smp_affinity_list (only items whose action is change);
3. the persisted files (sysctl.d, the boot script and its systemd unit, the irqbalance policy script and the
   numaforge block of /etc/default/irqbalance), each written to a temp file in its directory then ``mv``'d over
   the target (atomic), and the unit's multi-user.target.wants link;
4. on the real root only: ``systemctl daemon-reload`` and ``try-restart irqbalance`` when systemd is there.

``rollback_script`` writes the saved values back, restores or removes each file, drops the link and the state
file. Nothing here runs unless make_plan accepted every value first.
"""

from __future__ import annotations

import json
import secrets
import shlex
from typing import Any

from .plan import BOOT_SCRIPT, IRQBALANCE_DEFAULTS, POLICY_SCRIPT, STATE_FILE, UNIT_FILE, UNIT_LINK, OsPlan
from .read import HostState

STATE_FORMAT = "numaforge-hostos-previous/1"
EXECUTABLE = {BOOT_SCRIPT, POLICY_SCRIPT}


def _prelude(root: str) -> list[str]:
    r = "" if root in ("", "/") else root.rstrip("/")
    return [
        "set -eu",
        f"R={shlex.quote(r)}",
        'w() { printf "%s" "$1" > "$R$2" || { echo "numaforge: cannot write $1 to $2" >&2; exit 1; }; }',
        'rmf() { rm -f -- "$R$1"; }',
    ]


def _put(path: str, content: str, mode: str) -> list[str]:
    tag = f"NUMAFORGE_EOF_{secrets.token_hex(6)}"
    body = content if content.endswith("\n") else content + "\n"
    return [
        f'f="$R"{shlex.quote(path)}; d=${{f%/*}}; mkdir -p "$d"; t="$d/.${{f##*/}}.numaforge-tmp.$$"',
        f"cat > \"$t\" <<'{tag}'\n{body}{tag}",
        f'chmod {mode} "$t"; mv -f "$t" "$f"',
    ]


def _live_paths(item, state: HostState) -> list[str]:
    if item.kind == "governor":
        return [f"/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor" for c in sorted(state.governors)]
    return [item.path]


def previous_values(plan: OsPlan, state: HostState, numa_override: dict[str, int] | None = None) -> dict:
    """What the host had before this apply, merged over what an earlier apply saved (that one wins)."""
    saved: dict[str, Any] = {"format": STATE_FORMAT, "values": {}, "files": {}, "link": None}
    old = state.files.get(STATE_FILE)
    if old:
        try:
            doc = json.loads(old)
            if doc.get("format") == STATE_FORMAT:
                saved = doc
        except ValueError:
            pass  # an unreadable save is replaced (the apply then saves what it sees now)
    for item in plan.changes:
        if item.kind == "file":
            saved["files"].setdefault(item.path, state.files.get(item.path))
            continue
        for p in _live_paths(item, state):
            if item.kind == "governor":
                cpu = int(p.split("/cpu")[-1].split("/")[0])
                value = state.governors[cpu]
            else:
                value = item.current
            saved["values"].setdefault(p, value)
    for addr in numa_override or {}:
        dev = state.devices.get(addr)
        saved["values"].setdefault(
            f"/sys/bus/pci/devices/{addr}/numa_node", str(dev.numa_node) if dev and dev.numa_node is not None else None
        )
    if saved.get("link") is None:
        saved["link"] = state.unit_linked
    return saved


def apply_script(
    plan: OsPlan, state: HostState, root: str, numa_override: dict[str, int] | None = None, real_root: bool = True
) -> str | None:
    """The root shell script of an apply, or None when nothing differs (a second apply writes nothing)."""
    changes = plan.changes
    link_needed = plan.files.get(UNIT_FILE) is not None and not state.unit_linked
    link_drop = plan.files.get(UNIT_FILE) is None and state.unit_linked
    if not changes and not link_needed and not link_drop and not numa_override:
        return None
    lines = _prelude(root)
    lines += _put(STATE_FILE, json.dumps(previous_values(plan, state, numa_override), indent=1, sort_keys=True), "0644")
    for item in changes:
        if item.kind == "file":
            continue
        for p in _live_paths(item, state):
            lines.append(f"w {shlex.quote(str(item.desired))} {shlex.quote(p)}")
    for addr, node in sorted((numa_override or {}).items()):
        # the talk's workaround, only when asked for: the firmware gave no (or a wrong) proximity domain
        lines.append(f"w {int(node)} {shlex.quote(f'/sys/bus/pci/devices/{addr}/numa_node')}")
    for item in changes:
        if item.kind != "file":
            continue
        content = plan.files.get(item.path)
        if content is None:
            lines.append(f"rmf {shlex.quote(item.path)}")
        else:
            lines += _put(item.path, content, "0755" if item.path in EXECUTABLE else "0644")
    if link_needed:
        lines.append(
            f'mkdir -p "$R"{shlex.quote(UNIT_LINK.rsplit("/", 1)[0])}; '
            f'ln -sfn {shlex.quote(UNIT_FILE)} "$R"{shlex.quote(UNIT_LINK)}'
        )
    if link_drop:
        lines.append(f"rmf {shlex.quote(UNIT_LINK)}")
    lines.append("sync")
    if real_root:
        lines += _reload(any(i.path == IRQBALANCE_DEFAULTS or i.path == POLICY_SCRIPT for i in changes))
    return "\n".join(lines) + "\n"


def _reload(irqbalance: bool) -> list[str]:
    out = ["if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then", "  systemctl daemon-reload"]
    if irqbalance:
        out.append("  systemctl try-restart irqbalance.service || true")
    out.append("fi")
    return out


class NothingToRollBack(Exception):
    pass


def rollback_script(state: HostState, root: str, real_root: bool = True) -> tuple[str, dict]:
    """(script, saved) restoring what STATE_FILE holds. Raises NothingToRollBack when there is no save."""
    text = state.files.get(STATE_FILE)
    if not text:
        raise NothingToRollBack()
    try:
        saved = json.loads(text)
    except ValueError:
        raise ValueError(f"{STATE_FILE} on the host is not JSON; it was not written by numaforge os-apply") from None
    if saved.get("format") != STATE_FORMAT:
        raise ValueError(f"{STATE_FILE} has format {saved.get('format')!r}, expected {STATE_FORMAT}")
    lines = _prelude(root)
    # an IRQ saved before a reboot may be gone (MSI vectors are renumbered): restore what exists, say what not
    lines.append('wr() { if [ -e "$R$2" ]; then w "$1" "$2"; else echo "numaforge: $2 no longer exists" >&2; fi; }')
    for path, value in sorted(saved.get("values", {}).items()):
        if value is not None:
            lines.append(f"wr {shlex.quote(str(value))} {shlex.quote(path)}")
    for path, content in sorted(saved.get("files", {}).items()):
        if content is None:
            lines.append(f"rmf {shlex.quote(path)}")
        else:
            lines += _put(path, content, "0755" if path in EXECUTABLE else "0644")
    if not saved.get("link"):
        lines.append(f"rmf {shlex.quote(UNIT_LINK)}")
    lines.append(f"rmf {shlex.quote(STATE_FILE)}")
    lines.append("sync")
    if real_root:
        lines += _reload(IRQBALANCE_DEFAULTS in saved.get("files", {}))
    return "\n".join(lines) + "\n", saved
