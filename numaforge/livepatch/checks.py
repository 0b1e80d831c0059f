"""Pure checks of the validate state machine: the host facts script and its parser, preflight verdicts,
superseded patches, sysfs objects, dmesg problems and the transition decision (kpatch's own rules)."""

from __future__ import annotations

import re

from ..errors import NumaforgeError
from ..program import prog
from . import hostops
from .artifact import Artifact
from .errors import HostPreflightError

FACTS_SCRIPT = (
    r"""echo "uname_r=$(uname -r)"
echo "livepatch_dir=$(test -d /sys/kernel/livepatch && echo yes || echo no)"
echo "sig_enforce=$(cat /sys/module/module/parameters/sig_enforce 2>/dev/null)"
echo "lockdown=$(cat /sys/kernel/security/lockdown 2>/dev/null)"
echo "modules_disabled=$(cat /proc/sys/kernel/modules_disabled 2>/dev/null)"
echo "kpatch=$(command -v kpatch 2>/dev/null)"
echo "loaded_modules=$(cut -d' ' -f1 /proc/modules 2>/dev/null | tr '\n' ' ')"
echo "tainted=$(cat /proc/sys/kernel/tainted 2>/dev/null)"
"""
    + hostops.LIVEPATCHES_SCRIPT
)


def parse_facts(text: str) -> dict:
    facts: dict = {}
    for line in text.splitlines():
        key, sep, val = line.partition("=")
        if sep and key not in ("lp", "fn"):
            facts[key] = val.strip()
    facts["loaded_modules"] = facts.get("loaded_modules", "").split()
    facts["livepatches"] = hostops.parse_livepatches(text)
    facts["patched"] = [f"{name}/{fn}" for name, lp in facts["livepatches"].items() for fn in lp["functions"]]
    return facts


def func_name(entry: str) -> str:
    """'task_numa_migrate.isra.0,1' -> 'task_numa_migrate' (sysfs func dir -> C function)."""
    return entry.split(",")[0].split(".")[0]


def preflight_problems(facts: dict, art: Artifact, allow_replace: bool = False) -> list[NumaforgeError]:
    """Why this host cannot take the module; [] when it can. Pure.

    A replace-mode module (or one whose mode is unknown: no manifest) would disable every other live patch on
    the host (a CVE fix, say); it is refused while others are loaded unless allow_replace (--replace)."""
    where = "host"
    probs: list[NumaforgeError] = []
    if facts.get("uname_r") != art.release:
        probs.append(
            HostPreflightError(
                f"vermagic mismatch: module {art.path.name} is built for '{art.vermagic}', host runs "
                f"'{facts.get('uname_r')}'",
                f"{where} uname -r",
                "build the module for this host's kernel (a kpatch target whose kernel_release matches), or select "
                "hosts running that kernel",
            )
        )
    if facts.get("livepatch_dir") != "yes":
        probs.append(
            HostPreflightError(
                "/sys/kernel/livepatch is missing: the kernel has no CONFIG_LIVEPATCH",
                f"{where} /sys/kernel/livepatch",
                "boot a kernel built with CONFIG_LIVEPATCH=y",
            )
        )
    if facts.get("modules_disabled") == "1":
        probs.append(
            HostPreflightError(
                "module loading is disabled (kernel.modules_disabled=1)",
                f"{where} /proc/sys/kernel/modules_disabled",
                "reboot the host; modules_disabled cannot be reset at run time",
            )
        )
    if not art.signed:
        probs += _signature_problems(facts, where)
    if art.name in facts.get("loaded_modules", []):
        probs.append(
            HostPreflightError(
                f"module {art.name} is already loaded",
                f"{where} /proc/modules",
                f"unload it first (`kpatch unload {art.name}` or disable it and rmmod), "
                "or leave the host alone: it already runs this patch",
            )
        )
    supersede = superseded(facts, art)
    if supersede and not allow_replace:
        mode = "a replace-mode patch" if art.replace else "of unknown mode (no manifest.json says replace: false)"
        probs.append(
            HostPreflightError(
                f"module {art.name} is {mode}: loading it would disable the live patch(es) loaded on the host: "
                f"{', '.join(supersede)}",
                f"{where} /sys/kernel/livepatch",
                "build it non-replace (the default; `replace: true` in kpatch/targets/ makes it replace), or pass "
                "--replace to supersede them on purpose (it then contains their fixes too: a cumulative patch)",
            )
        )
    probs += _clashes(facts, art, where)
    return probs


def _signature_problems(facts: dict, where: str) -> list[NumaforgeError]:
    """An unsigned module on a host that only loads signed ones (sig_enforce, lockdown)."""
    probs: list[NumaforgeError] = []
    if facts.get("sig_enforce") == "Y":
        probs.append(
            HostPreflightError(
                "the host only loads signed modules (module.sig_enforce=Y) and this module is unsigned",
                f"{where} /sys/module/module/parameters/sig_enforce",
                sign_fix(),
            )
        )
    lock = re.search(r"\[(\w+)\]", facts.get("lockdown", ""))
    if lock and lock.group(1) in ("integrity", "confidentiality"):
        probs.append(
            HostPreflightError(
                f"kernel lockdown is '{lock.group(1)}': unsigned modules are refused",
                f"{where} /sys/kernel/security/lockdown",
                sign_fix(),
            )
        )
    return probs


def _clashes(facts: dict, art: Artifact, where: str) -> list[NumaforgeError]:
    """Another loaded live patch that replaces one of this module's functions."""
    others = [p for p in facts.get("patched", []) if p.split("/", 1)[0] != art.name]
    wanted = {func_name(f) for f in art.functions}
    clash = sorted({p for p in others if func_name(p.rsplit("/", 1)[-1]) in wanted})
    if not clash:
        return []
    return [
        HostPreflightError(
            f"another live patch already replaces {', '.join(clash)}",
            f"{where} /sys/kernel/livepatch",
            "unload the other patch first, or build a cumulative patch that contains both changes",
        )
    ]


def sign_fix() -> str:
    """How to sign a module and enroll its certificate (names the running program: numaforge.program)."""
    return (
        f"sign the module with a key the host trusts: `{prog()} build-kpatch --sign-key KEY.pem --sign-cert CERT.pem` "
        "(the kernel tree's scripts/sign-file), and enroll that certificate on the host with `mokutil --import "
        "CERT.der` + a reboot to confirm in MokManager (docs/kpatch.md, 'Signing')"
    )


def superseded(facts: dict, art: Artifact) -> list[str]:
    """The other live patches a replace-mode (or unknown-mode) module would disable on this host."""
    if art.replace is False:
        return []
    return sorted(n for n in facts.get("livepatches", {}) if n != art.name)


def parse_objects(text: str) -> dict[str, list[str]]:
    """Lines 'object/func,sympos' -> {object: [func,sympos...]}."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "/" in line:
            obj, fn = line.strip().split("/", 1)
            out.setdefault(obj, []).append(fn)
    return out


_DMESG_BAD = re.compile(
    r"livepatch:.*(fail|error|unable|can't|cannot|invalid|not supported)|"
    r"WARNING: CPU|BUG: |Call Trace:|general protection|Oops",
    re.I,
)


def dmesg_problems(text: str, module: str) -> list[str]:
    """Kernel log lines (new since the load) that show a live-patch error or a kernel warning."""
    return [ln.strip() for ln in text.splitlines() if _DMESG_BAD.search(ln)]


PROD_AFTER = 2.0  # s into a transition before idle CPUs are prodded, then once a second (prod_due)


def prod_due(elapsed: float, last_prod: float | None, after: float = PROD_AFTER) -> bool:
    """Whether the transition wait prods the host's idle CPUs now. Pure. 5.10's klp_try_complete_transition
    never wakes an idle CPU, and an idle task switches only when its CPU leaves the idle loop (upstream added
    the wake-up in 5.16: "sched,livepatch: Use wake_up_if_idle()"); a CPU that runs nothing holds the transition
    until the kernel signals tasks at 15 s, or for ever on an isolated CPU. Prodding = running `true` on each
    online CPU: what upstream's IPI does, from user space."""
    return elapsed >= after and (last_prod is None or elapsed - last_prod >= 1.0)


def transition_action(elapsed: float, signalled: bool, signal_after: float, revert_after: float) -> str:
    """What the transition wait does next: 'wait' | 'signal' | 'revert'. Pure."""
    if elapsed >= revert_after:
        return "revert"
    if elapsed >= signal_after and not signalled:
        return "signal"
    return "wait"
