"""OsPlan = every desired OS value checked against the host, then current vs desired per setting (pure core).

``make_plan(profile, state, nps=..., sockets=...)`` raises :class:`HostPlanError` listing EVERY problem at once
(unknown sysctl, THP or governor the kernel does not offer, a device missing or without IRQs...) before
anything is written. Otherwise each item is ``ok`` (already so) or ``change`` (apply writes it). Persisted files
are items too, so a second apply after a first one plans nothing. Device checks (numa_node against the layout
the BIOS NPS gives) are not settings: they are reported as ``checks`` with a verdict and the likely cause.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import NumaforgeError
from ..facts.captures import cpulist, parse_cpulist
from ..textsafe import has_control, printable
from .profile import HostProfile
from .read import THP_DIR, HostState, sysctl_path

SYSCTL_FILE = "/etc/sysctl.d/60-numaforge-hostos.conf"
BOOT_SCRIPT = "/etc/numaforge/hostos-boot.sh"
UNIT_FILE = "/etc/systemd/system/numaforge-hostos.service"
UNIT_LINK = "/etc/systemd/system/multi-user.target.wants/numaforge-hostos.service"
POLICY_SCRIPT = "/etc/numaforge/irqbalance-policy.sh"
IRQBALANCE_DEFAULTS = "/etc/default/irqbalance"
STATE_FILE = "/var/lib/numaforge/hostos/previous.json"
MANAGED_FILES = [SYSCTL_FILE, BOOT_SCRIPT, UNIT_FILE, POLICY_SCRIPT, IRQBALANCE_DEFAULTS, STATE_FILE]
BLOCK_BEGIN = "# BEGIN numaforge os-apply"
BLOCK_END = "# END numaforge os-apply"


class HostPlanError(NumaforgeError):
    """Desired OS values the host cannot take (nothing was written)."""

    exit_code = 2

    def __init__(self, problems: list[str], where: str | None = None):
        self.problems = list(problems)
        super().__init__(
            "host OS profile rejected before any write:\n    " + "\n    ".join(problems),
            where,
            "fix the host profile (hostos/profiles/) or the inventory, then re-run os-plan",
        )


@dataclass
class Item:
    kind: str  # sysctl | thp | governor | irq | file
    name: str
    path: str  # where it lives on the host
    current: Any
    desired: Any
    action: str  # ok | change

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "name": self.name,
            "path": self.path,
            "current": self.current,
            "desired": self.desired,
            "action": self.action,
        }


@dataclass
class Check:
    name: str
    verdict: str  # ok | fail
    evidence: str
    why: str = ""

    def as_dict(self) -> dict:
        return {"name": self.name, "verdict": self.verdict, "evidence": self.evidence, "why": self.why}


@dataclass
class OsPlan:
    items: list[Item] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    files: dict[str, str | None] = field(default_factory=dict)  # managed path -> desired content (None: absent)
    pinned: dict[str, str] = field(default_factory=dict)  # irq -> desired cpulist

    @property
    def changes(self) -> list[Item]:
        return [i for i in self.items if i.action == "change"]

    def as_dict(self) -> dict:
        return {
            "items": [i.as_dict() for i in self.items],
            "checks": [c.as_dict() for c in self.checks],
            "changes": len(self.changes),
        }


# --------------------------------------------------------------------------------------------- checks
BIOS_CAUSE = (
    "likely BIOS cause: NUMA nodes per socket (NPS) or 'ACPI SRAT L3 cache as NUMA domain' differs from "
    "the profile, or the firmware gives the device's PCI root no proximity domain (_PXM); run bios-verify"
)
REMEDY = (
    "fix the BIOS; only as a documented last resort: os-apply --numa-node-override ADDR=NODE "
    "(`echo NODE > /sys/bus/pci/devices/ADDR/numa_node`, taints the kernel, lost at reboot)"
)


def device_checks(profile: HostProfile, state: HostState, nps: int | None, sockets: int | None) -> list[Check]:
    """numa_node of every IRQ device against the node layout (sockets x NPS, or the profile's checks.nodes)."""
    if not profile.device_numa:
        return []
    checks: list[Check] = []
    online = sorted(state.nodes)
    expected = profile.nodes
    if expected is None and nps is not None and sockets:
        expected = sockets * nps if nps > 0 else 1
    if expected is not None:
        if len(online) == expected:
            checks.append(Check("numa-nodes", "ok", f"{len(online)} nodes online"))
        else:
            checks.append(
                Check(
                    "numa-nodes",
                    "fail",
                    f"{len(online)} nodes online, expected {expected} ({sockets} socket(s) x NPS {nps})"
                    if profile.nodes is None
                    else f"{len(online)} nodes online, the profile expects {expected}",
                    BIOS_CAUSE,
                )
            )
    multi = len(online) > 1
    for addr in profile.irq_devices + [a for a in profile.expect_node if a not in profile.irq_devices]:
        dev = state.devices.get(addr)
        name = f"numa_node {addr}"
        if dev is None or not dev.present:
            checks.append(Check(name, "fail", "device not on the host", "check the inventory's PCI address"))
            continue
        node = dev.numa_node
        want = profile.expect_node.get(addr)
        if node is None or node < 0:
            if multi or want is not None:
                checks.append(
                    Check(
                        name,
                        "fail",
                        f"reports {node if node is not None else 'nothing'} on a host with {len(online)} NUMA nodes",
                        f"{BIOS_CAUSE}; remedy: {REMEDY}",
                    )
                )
            else:
                checks.append(Check(name, "ok", "reports -1 on a single-node host (nothing to be local to)"))
            continue
        if node not in state.nodes:
            checks.append(
                Check(name, "fail", f"reports node {node}, which is not online (online: {online})", BIOS_CAUSE)
            )
            continue
        if want is not None and node != want:
            checks.append(
                Check(
                    name,
                    "fail",
                    f"reports node {node}, the profile expects {want}",
                    f"{BIOS_CAUSE}; or the card sits in another slot than the inventory says",
                )
            )
            continue
        if dev.local_cpus and dev.local_cpus != state.nodes[node]:
            checks.append(
                Check(
                    name,
                    "fail",
                    f"node {node} but local_cpulist {cpulist(dev.local_cpus)} != the node's "
                    f"CPUs {cpulist(state.nodes[node])}",
                    BIOS_CAUSE,
                )
            )
            continue
        checks.append(Check(name, "ok", f"node {node}, local CPUs {cpulist(dev.local_cpus)}"))
    return checks


# --------------------------------------------------------------------------------------------- persisted files
def _header(profile: HostProfile) -> str:
    return f"# written by numaforge os-apply (host profile {profile.name}); os-apply --rollback removes it\n"


def boot_script(profile: HostProfile, explicit_cpus: dict[str, str]) -> str:
    """Re-applies at boot what sysctl.d cannot hold: THP, the governor, IRQ affinity (device -> IRQs looked up
    at boot, since MSI IRQ numbers can change)."""
    lines = [
        "#!/bin/sh",
        _header(profile).rstrip(),
        "set -u",
        "rc=0",
        'w() { printf "%s" "$1" > "$2" 2>/dev/null || { echo "numaforge-hostos: cannot write $2" >&2; rc=1; }; }',
        'pin() { d=/sys/bus/pci/devices/$1; c=$2; [ "$c" = local ] && c=$(cat "$d/local_cpulist"); '
        'irqs=$(ls "$d/msi_irqs" 2>/dev/null); [ -n "$irqs" ] || irqs=$(cat "$d/irq" 2>/dev/null); '
        'for i in $irqs; do [ "$i" = 0 ] || w "$c" "/proc/irq/$i/smp_affinity_list"; done; }',
    ]
    for k in ("enabled", "defrag"):
        if k in profile.thp:
            lines.append(f"w {profile.thp[k]} {THP_DIR}/{k}")
    if profile.governor:
        lines.append(
            f'for g in /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor; do w {profile.governor} "$g"; done'
        )
    for addr in profile.irq_devices:
        lines.append(f"pin {addr} {explicit_cpus.get(addr, 'local')}")
    lines.append("exit $rc")
    return "\n".join(lines) + "\n"


def unit_file(profile: HostProfile) -> str:
    return (
        f"{_header(profile)}[Unit]\nDescription=numaforge host OS settings (THP, cpufreq governor, IRQ affinity)\n"
        "After=systemd-sysctl.service irqbalance.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\n"
        f"ExecStart=/bin/sh {BOOT_SCRIPT}\n\n[Install]\nWantedBy=multi-user.target\n"
    )


def policy_script(profile: HostProfile) -> str:
    """irqbalance --policyscript: `ban=true` for every IRQ of a pinned device (irqbalance(1))."""
    cases = "|".join(f"*/{a}" for a in profile.irq_devices)
    return (
        f"#!/bin/sh\n{_header(profile)}# irqbalance runs this once per IRQ with the device's sysfs path and "
        f'the IRQ number\ncase "$1" in\n  {cases}) echo ban=true ;;\nesac\nexit 0\n'
    )


def irqbalance_defaults(current: str | None) -> str:
    """/etc/default/irqbalance with a numaforge block that adds --policyscript to IRQBALANCE_ARGS (the user's
    own IRQBALANCE_ARGS, if set outside the block, is kept inside ours: the last assignment wins)."""
    kept, theirs = [], ""
    inside = False
    for line in (current or "").splitlines():
        if line.startswith(BLOCK_BEGIN):
            inside = True
            continue
        if line.startswith(BLOCK_END):
            inside = False
            continue
        if inside:
            continue
        kept.append(line)
        s = line.strip()
        if s.startswith("IRQBALANCE_ARGS="):
            theirs = s.split("=", 1)[1].strip().strip('"').strip("'")
    args = " ".join(x for x in (theirs, f"--policyscript={POLICY_SCRIPT}") if x)
    block = [
        f"{BLOCK_BEGIN}: pinned IRQs are banned through the policy script; irqbalance balances the rest",
        f'IRQBALANCE_ARGS="{args}"',
        BLOCK_END,
    ]
    return "\n".join(kept + block) + "\n"


def desired_files(profile: HostProfile, state: HostState, explicit_cpus: dict[str, str]) -> dict[str, str | None]:
    files: dict[str, str | None] = {}
    files[SYSCTL_FILE] = (
        _header(profile) + "".join(f"{k} = {v}\n" for k, v in profile.sysctl.items()) if profile.sysctl else None
    )
    needs_boot = bool(profile.thp or profile.governor or profile.irq_devices)
    files[BOOT_SCRIPT] = boot_script(profile, explicit_cpus) if needs_boot else None
    files[UNIT_FILE] = unit_file(profile) if needs_boot else None
    ban = bool(profile.irq_devices) and profile.irqbalance == "ban"
    files[POLICY_SCRIPT] = policy_script(profile) if ban else None
    cur = state.files.get(IRQBALANCE_DEFAULTS)
    if ban:
        files[IRQBALANCE_DEFAULTS] = irqbalance_defaults(cur)
    elif cur is not None and BLOCK_BEGIN in cur:
        files[IRQBALANCE_DEFAULTS] = irqbalance_defaults(cur).split(BLOCK_BEGIN)[0]
    return files


# --------------------------------------------------------------------------------------------- the plan
def _did_you_mean(key: str, state: HostState) -> str:
    parent, leaf = sysctl_path(key).rsplit("/", 1)
    entries = state.sysctl_dirs.get(parent)
    if entries is None:
        return f" (no {parent} on the host)"
    close = difflib.get_close_matches(leaf, entries, n=1)
    return f" (did you mean {parent[len('/proc/sys/') :].replace('/', '.')}.{close[0]}?)" if close else ""


def make_plan(
    profile: HostProfile, state: HostState, nps: int | None = None, sockets: int | None = None, host: str = ""
) -> OsPlan:
    """Validate every desired value against the host (all problems at once), then diff."""
    problems: list[str] = []
    plan = OsPlan()
    _plan_sysctls(profile, state, plan, problems, host)
    _plan_thp(profile, state, plan, problems, host)
    _plan_governor(profile, state, plan, problems, host)
    explicit = _plan_irqs(profile, state, plan, problems, host)
    if problems:
        raise HostPlanError(problems, host or None)
    plan.files = desired_files(profile, state, explicit)
    for path, wanted in plan.files.items():
        content = state.files.get(path)
        plan.items.append(
            Item(
                "file",
                path,
                path,
                _file_summary(content),
                _file_summary(wanted),
                "ok" if content == wanted else "change",
            )
        )
    plan.checks = device_checks(profile, state, nps, sockets)
    return plan


# Sysctls whose kind and range the kernel documents (Documentation/admin-guide/sysctl/, Linux 5.10): a value out
# of range is refused before any write, and a current value that is not a number is "cannot tell". Every other
# sysctl takes its kind from the host's current value: numbers stay numbers, with as many fields.
KNOWN_SYSCTLS: dict[str, tuple[int, int]] = {
    "vm.zone_reclaim_mode": (0, 7),  # a bit mask: 1 reclaim, 2 write dirty pages, 4 swap
    "kernel.numa_balancing": (0, 1),  # 5.10: off / on (2 and 3 came with memory tiering in 5.18)
    "vm.swappiness": (0, 200),
}
# a sysctl number is at most an unsigned long; anything wider is not a value the kernel can hold
SYSCTL_MIN, SYSCTL_MAX = -(2**63), 2**64 - 1
_NUMBERS = re.compile(r"^-?[0-9]{1,20}(\s+-?[0-9]{1,20})*$")  # 20 digits: 2**64 - 1; longer is never a value
_SHOWN = 80  # characters of a host's or profile's value shown in a problem


def _shown(value: str) -> str:
    text = printable(value[:_SHOWN]) + ("..." if len(value) > _SHOWN else "")
    return repr(text)


def sysctl_problem(key: str, want: str, cur: str) -> str | None:
    """Why ``want`` cannot be written to sysctl ``key`` whose current value on the host is ``cur`` (None: it
    can). Numeric sysctls (known ones, or a current value of numbers) take integers only, as many fields as the
    host shows, each within the kernel's range; other sysctls take one line of printable text."""
    known = KNOWN_SYSCTLS.get(key)
    numeric = known is not None or bool(_NUMBERS.match(cur))
    if not numeric:
        if has_control(want):
            return f"the value {_shown(want)} holds control characters"
        return None
    if not _NUMBERS.match(cur):
        return (
            f"cannot tell: the host reports {_shown(cur)}, not a number, for a numeric sysctl; nothing is "
            "written over a value numaforge cannot read"
        )
    if not _NUMBERS.match(want):
        return f"the value {_shown(want)} is not a number (the host's current value is {cur})"
    fields, cur_fields = want.split(), cur.split()
    if len(fields) != len(cur_fields):
        return f"the value {_shown(want)} has {len(fields)} field(s), the kernel's has {len(cur_fields)} ({cur})"
    lo, hi = known if known is not None else (SYSCTL_MIN, SYSCTL_MAX)
    if any(not lo <= int(t) <= hi for t in cur_fields):
        return f"cannot tell: the host reports {_shown(cur)}, outside the kernel's range {lo}..{hi}"
    if any(not lo <= int(t) <= hi for t in fields):
        return f"the value {_shown(want)} is outside the kernel's range {lo}..{hi}"
    return None


def _plan_sysctls(profile: HostProfile, state: HostState, plan: OsPlan, problems: list[str], host: str) -> None:
    for key, want in profile.sysctl.items():
        cur = state.sysctls.get(key)
        if cur is None:
            problems.append(
                f"{host}/sysctl {key}: unknown on this kernel, {sysctl_path(key)} does not exist"
                f"{_did_you_mean(key, state)}"
            )
            continue
        bad = sysctl_problem(key, want, cur)
        if bad is not None:
            problems.append(f"{host}/sysctl {key}: {bad}")
            continue
        plan.items.append(
            Item("sysctl", key, sysctl_path(key), cur, want, "ok" if " ".join(want.split()) == cur else "change")
        )


def _plan_thp(profile: HostProfile, state: HostState, plan: OsPlan, problems: list[str], host: str) -> None:
    for k, want in profile.thp.items():
        if k not in state.thp:
            problems.append(
                f"{host}/thp {k}: {THP_DIR}/{k} does not exist (kernel without "
                f"CONFIG_TRANSPARENT_HUGEPAGE?); set thp.{k}: null in the profile for this host"
            )
            continue
        cur, options = state.thp[k]
        if want not in options:
            problems.append(f"{host}/thp {k}={want!r}: this kernel offers {', '.join(options)}")
            continue
        plan.items.append(Item("thp", k, f"{THP_DIR}/{k}", cur, want, "ok" if cur == want else "change"))


def _plan_governor(profile: HostProfile, state: HostState, plan: OsPlan, problems: list[str], host: str) -> None:
    if not profile.governor:
        return
    if not state.governors:
        problems.append(
            f"{host}/cpufreq_governor {profile.governor}: the host has no cpufreq "
            "(/sys/devices/system/cpu/cpu*/cpufreq missing: VM, or no cpufreq driver loaded); "
            "set cpufreq_governor: null for this host"
        )
    elif state.available_governors and profile.governor not in state.available_governors:
        problems.append(
            f"{host}/cpufreq_governor {profile.governor!r}: this host offers {', '.join(state.available_governors)}"
        )
    else:
        values = sorted(set(state.governors.values()))
        cur = values[0] if len(values) == 1 else "mixed: " + ", ".join(values)
        plan.items.append(
            Item(
                "governor",
                f"cpu{cpulist(state.governors)}",
                "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
                cur,
                profile.governor,
                "ok" if values == [profile.governor] else "change",
            )
        )


def _plan_irqs(profile: HostProfile, state: HostState, plan: OsPlan, problems: list[str], host: str) -> dict[str, str]:
    """IRQ affinity items for the profile's devices; returns the cpulists given explicitly (node:N or a list)."""
    explicit: dict[str, str] = {}
    for addr in profile.irq_devices:
        dev = state.devices.get(addr)
        if dev is None or not dev.present:
            problems.append(f"{host}/irq {addr}: no such PCI device on the host (/sys/bus/pci/devices/{addr})")
            continue
        if not dev.irqs:
            problems.append(f"{host}/irq {addr}: the device has no IRQs (no driver bound?)")
            continue
        spec = profile.irq_cpus
        if spec == "local":
            cpus = dev.local_cpus
            if not cpus:
                problems.append(f"{host}/irq {addr}: the device reports no local_cpulist; use irq.cpus: node:N")
                continue
        elif spec.startswith("node:"):
            n = int(spec[5:])
            if n not in state.nodes:
                problems.append(
                    f"{host}/irq {addr}: irq.cpus {spec}: no such NUMA node (online: {sorted(state.nodes)})"
                )
                continue
            cpus = state.nodes[n]
            explicit[addr] = cpulist(cpus)
        else:
            cpus = parse_cpulist(spec)
            explicit[addr] = cpulist(cpus)
        for irq in dev.irqs:
            affinity = state.affinity.get(irq)
            if affinity is None:
                problems.append(f"{host}/irq {irq} of {addr}: /proc/irq/{irq}/smp_affinity_list does not exist")
                continue
            plan.pinned[irq] = cpulist(cpus)
            plan.items.append(
                Item(
                    "irq",
                    f"{irq} ({addr})",
                    f"/proc/irq/{irq}/smp_affinity_list",
                    cpulist(affinity),
                    cpulist(cpus),
                    "ok" if affinity == cpus else "change",
                )
            )
    return explicit


def _file_summary(content: str | None) -> str:
    if content is None:
        return "absent"
    return f"{len(content.splitlines())} lines"
