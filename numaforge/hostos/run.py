"""The host OS pipeline per host and over a fleet: os-plan, os-apply (and --rollback), os-verify, the locality gate.

    outcome = run_os(hosts, "apply", OsOptions(profile="epyc-gpudirect-host"), Rollout(canary=1, gate="locality"))

Per host: connect (numaforge.remote.ssh: strict host keys, sudo -n when the inventory says ssh.sudo), render the
host profile (``--profile`` or the host's ``hostos_profile`` var), read the OS state in one command, plan
(every problem at once, nothing written), then apply/verify. The BIOS NPS for the device checks comes from the
host's BIOS profile (``bios_profile``) when it sets ``numa_nodes_per_socket``.

``hostos_root`` (inventory var, default ``/``) prefixes every path on the host. Only the SSH test hosts set it
(a tree of captured /proc and /sys files): the test must not retune the build server's own kernel.

Locality gate (``gate="locality"``, canary hosts only): before and after the apply the host's NUMA counters are
sampled twice ``gate_seconds`` apart; the share of local allocations (numastat local_node / (local_node +
other_node)) and, when NUMA balancing produced hint faults, numa_hint_faults_local / numa_hint_faults, are
compared. The canary fails -- and the fleet runner stops the rollout -- when a share dropped by more than
``gate_threshold`` (absolute, default 0.02 = 2 points), or when the window counted nothing to judge by.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .. import budget
from .. import journal as jr
from ..bios.errors import ProfileError
from ..bios.profile import render_profile as render_bios_profile
from ..defaults import DEFAULT_GATE_THRESHOLD
from ..errors import NumaforgeError
from ..fleet import INTERRUPTED, FleetOutcome, Rollout, run_fleet
from ..program import prog
from ..remote.ssh import connect
from ..report import HostResult
from ..secrets import redact
from .apply import NothingToRollBack, apply_script, rollback_script
from .plan import MANAGED_FILES, OsPlan, make_plan
from .profile import HostProfile, profile_facts, render_profile
from .read import (
    HostState,
    bracketed,
    host_state,
    parse_snapshot,
    snapshot_script,
    take_snapshot,
    unexpected_content,
)


@dataclass
class OsOptions:
    profile: str | None = None
    rollback: bool = False
    numa_override: dict[str, int] = field(default_factory=dict)
    gate: str | None = None  # set by run_os from Rollout.gate (the one place --gate is carried)
    gate_seconds: float = 10.0
    gate_threshold: float = DEFAULT_GATE_THRESHOLD
    accept_new_host_key: bool = False
    canary_hosts: list[str] = field(default_factory=list)
    journal: Any = None  # numaforge.journal.Journal of this os-apply run (None: no resume)


def host_root(host) -> str:
    return str(host.vars.get("hostos_root") or "/")


def bios_nps(host) -> int | None:
    """numa_nodes_per_socket of the host's BIOS profile, or None when it has none (or it does not render, or it is
    a preference list of several values: which one the BMC takes is only known from its registry)."""
    if not host.bios_profile:
        return None
    try:
        nps = render_bios_profile(host.bios_profile, profile_facts(host)).settings.get("numa_nodes_per_socket")
    except ProfileError:
        return None
    if isinstance(nps, list):
        return nps[0] if len(nps) == 1 else None
    return nps


def resolve_profile(host, opts: OsOptions) -> HostProfile:
    name = opts.profile or host.vars.get("hostos_profile")
    if not name:
        raise ProfileError(
            f"{host.name}: no host OS profile",
            str(host.location),
            "set vars.hostos_profile for the host (or a group), or pass --profile",
        )
    return render_profile(name, profile_facts(host))


def read_state(remote, host, profile: HostProfile) -> HostState:
    text = take_snapshot(remote, host_root(host), list(profile.sysctl), _devices(profile), MANAGED_FILES)
    try:
        return host_state(parse_snapshot(text), list(profile.sysctl), _devices(profile), MANAGED_FILES)
    except ValueError as exc:
        raise unexpected_content(exc, host.name) from None


def _devices(profile: HostProfile) -> list[str]:
    return list(dict.fromkeys(profile.irq_devices + list(profile.expect_node)))


def _plan(remote, host, profile) -> tuple[HostState, OsPlan]:
    state = read_state(remote, host, profile)
    return state, make_plan(profile, state, nps=bios_nps(host), sockets=host.hardware.sockets, host=host.name)


def _record(res: HostResult, profile: HostProfile, plan: OsPlan) -> None:
    res.data.update({"profile": profile.name, "chain": profile.chain, **plan.as_dict()})


def _failed_checks(plan: OsPlan) -> list[str]:
    return [f"{c.name}: {c.evidence}; {c.why}" for c in plan.checks if c.verdict != "ok"]


# --------------------------------------------------------------------------------------------- per host
def _read_plan(host, opts: OsOptions) -> tuple[HostResult, OsPlan]:
    res = HostResult(host.name)
    profile = resolve_profile(host, opts)
    with connect(host.ssh, host.name, accept_new_host_key=opts.accept_new_host_key) as remote:
        with res.step("read"):
            _state, plan = _plan(remote, host, profile)
    _record(res, profile, plan)
    return res, plan


def plan_host(host, opts: OsOptions) -> HostResult:
    res, plan = _read_plan(host, opts)
    res.message = f"{len(plan.changes)} to change, {len(plan.items) - len(plan.changes)} ok"
    bad = _failed_checks(plan)
    if bad:
        res.message += f"; {len(bad)} device check(s) fail (os-verify will fail)"
    return res


def verify_host(host, opts: OsOptions) -> HostResult:
    res, plan = _read_plan(host, opts)
    _verdict(res, plan)
    return res


def _verdict(res: HostResult, plan: OsPlan) -> None:
    differ = [f"{i.kind} {i.name}: {i.current} (want {i.desired})" for i in plan.changes]
    bad = _failed_checks(plan)
    if differ or bad:
        res.status = "failed"
        res.message = "; ".join(differ + bad)
    else:
        res.message = f"all {len(plan.items)} settings as the profile says; {len(plan.checks)} device check(s) ok"


def apply_host(host, opts: OsOptions) -> HostResult:
    res = HostResult(host.name)
    root = host_root(host)
    sudo = bool(host.ssh.sudo)
    if opts.rollback:
        return _rollback_host(host, opts, res, root, sudo)
    if opts.journal is not None and opts.journal.done(host, jr.VERIFIED):
        # an interrupted identical run already applied and verified this host (its gate included): verify only
        res = verify_host(host, opts)
        res.message = f"resumed from {opts.journal.path}: applied and verified before; {res.message}"
        if res.status != "failed":
            res.status = "unchanged"  # this run changed nothing (the interrupted one did: its report says so)
        return res
    profile = resolve_profile(host, opts)
    gate = opts.gate == "locality" and host.name in opts.canary_hosts
    changed: list[dict] = []
    try:
        after_plan, before, after = _apply_steps(host, opts, res, profile, gate, changed)
    except NumaforgeError as exc:
        return _cut(res, exc, changed)
    _record(res, profile, after_plan)
    res.data["changed"] = changed
    # "changes" counts what this run wrote (the items beside it); what still differs after the verify read is
    # "remaining" (the after-plan's own count was 0 beside two changed items: issue 39 item 9)
    res.data["changes"], res.data["remaining"] = len(changed), len(after_plan.changes)
    _verdict(res, after_plan)
    if res.status != "failed":
        # one vocabulary with bios-apply: a host whose settings were written is "changed", not "ok"; the
        # message does not repeat the status ("changed changed 2")
        res.status = "changed" if changed else "unchanged"
        res.message = (
            f"{len(changed)} written: " + ", ".join(f"{c['kind']} {c['name']}" for c in changed)
            if changed
            else "nothing to change"
        ) + "; verified"
    if gate:
        assert before is not None and after is not None, "a gate host measured both windows"
        ok, text, detail = gate_verdict(before, after, opts.gate_threshold)
        res.data["gate"] = {"kind": "locality", "ok": ok, **detail}
        res.message += f"; locality gate: {text}"
        if not ok:
            res.status = "failed"
            res.message += f" (the rollout stops; undo this host with os-apply --rollback --host {host.name})"
    if opts.journal is not None and res.status != "failed":
        opts.journal.record(host, jr.VERIFIED)
    return res


def _rollback_host(host, opts, res: HostResult, root: str, sudo: bool) -> HostResult:
    with connect(host.ssh, host.name, accept_new_host_key=opts.accept_new_host_key) as remote:
        with res.step("read"):
            text = take_snapshot(remote, root, [], [], MANAGED_FILES)
            try:
                state = host_state(parse_snapshot(text), [], [], MANAGED_FILES)
            except ValueError as exc:
                raise unexpected_content(exc, host.name) from None
        try:
            script, saved = rollback_script(state, root, real_root=root == "/")
        except NothingToRollBack:
            res.status = "unchanged"
            res.message = "nothing to roll back (no saved values on the host: never applied, or rolled back)"
            return res
        except ValueError as exc:
            res.status, res.message = "failed", f"{exc}; nothing was changed"
            return res
        with res.step("rollback"):
            remote.run("sh -s", stdin=script, timeout=120, sudo=sudo)
        with res.step("verify"):
            paths = sorted(p for p, v in saved.get("values", {}).items() if v is not None)
            try:
                check = parse_snapshot(
                    remote.run("sh -s", stdin=_cat_script(root, paths), timeout=60, check=False).stdout
                )
            except ValueError as exc:
                raise unexpected_content(exc, host.name) from None
    wrong = [
        f"{p}: {'gone' if p not in check.files else repr(check.files[p])} (want {v!r})"
        for p, v in saved["values"].items()
        if v is not None and _norm(check.files.get(p)) != _norm(v)
    ]
    res.data["restored"] = saved
    if wrong:
        res.status, res.message = "failed", "rolled back, but not every value came back: " + "; ".join(wrong)
    else:
        res.status = "changed"
        res.message = (
            f"restored {len(saved.get('values', {}))} value(s) and {len(saved.get('files', {}))} file(s) "
            "from before the first os-apply"
        )
    return res


def _norm(v) -> str:
    s = " ".join(str(v or "").split())
    chosen, _ = bracketed(s)
    return chosen if chosen is not None else s


def _cat_script(root: str, paths: list[str]) -> str:
    return snapshot_script(root, paths, [])


# --------------------------------------------------------------------------------------------- locality
def locality_counters(state: HostState) -> dict[str, int]:
    return {
        "local_node": sum(s.get("local_node", 0) for s in state.numastat.values()),
        "other_node": sum(s.get("other_node", 0) for s in state.numastat.values()),
        "hint_faults": state.vmstat.get("numa_hint_faults", 0),
        "hint_faults_local": state.vmstat.get("numa_hint_faults_local", 0),
    }


def locality_share(a: dict[str, int], b: dict[str, int]) -> dict[str, Any]:
    """Shares over the window a -> b (counter deltas): None where nothing was counted."""
    local, other = b["local_node"] - a["local_node"], b["other_node"] - a["other_node"]
    hint, hint_local = b["hint_faults"] - a["hint_faults"], b["hint_faults_local"] - a["hint_faults_local"]
    return {
        "alloc_local_share": local / (local + other) if local + other > 0 else None,
        "allocations": local + other,
        "hint_local_share": hint_local / hint if hint > 0 else None,
        "hint_faults": hint,
    }


def _apply_steps(
    host, opts: OsOptions, res: HostResult, profile: HostProfile, gate: bool, changed: list[dict]
) -> tuple[OsPlan, dict | None, dict | None]:
    """os-apply's steps on one host: [locality-before], plan, apply, verify, [locality-after]. ``changed`` gets
    each item once its apply script has ended (``res.data["on_the_wire"]`` holds them while it runs), so a host
    cut part way still reports what it wrote (:func:`_cut`). Returns (the verify plan, the gate's two windows)."""
    root, sudo = host_root(host), bool(host.ssh.sudo)
    before = after = None
    with connect(host.ssh, host.name, accept_new_host_key=opts.accept_new_host_key) as remote:
        if gate:
            with res.step("locality-before"):
                before = measure_locality(remote, root, opts.gate_seconds)
        # with --numa-node-override the device's local_cpulist changes with the write: a second pass plans the
        # IRQ affinity from the node the device reports now (the first pass's save is kept)
        for _pass in range(2 if opts.numa_override else 1):
            with res.step("plan"):
                state, plan = _plan(remote, host, profile)
            script = apply_script(plan, state, root, opts.numa_override, real_root=root == "/")
            items = [i.as_dict() for i in plan.changes]
            if script is not None:
                res.data["on_the_wire"] = items
                with res.step("apply") as s:
                    remote.run("sh -s", stdin=script, timeout=120, sudo=sudo)
                    s.detail = {"changed": len(plan.changes)}
                del res.data["on_the_wire"]
                if opts.journal is not None:
                    opts.journal.record(host, jr.PATCHED, changed=len(plan.changes))
            changed += items
        with res.step("verify"):
            _state, after_plan = _plan(remote, host, profile)
        if gate:
            with res.step("locality-after"):
                after = measure_locality(remote, root, opts.gate_seconds)
    return after_plan, before, after


def _cut(res: HostResult, exc: NumaforgeError, changed: list[dict]) -> HostResult:
    """A host whose step raised: interrupted (a signal: budget.Stopped) or failed, with its steps and what it
    wrote. The fleet's own result for a raised error has neither: a signal at locality-after (after the write)
    reported the host interrupted with no word of the write (issue 40). An apply script cut while it ran may or
    may not have written: its items are "outcome unknown" (os-verify or os-plan shows what the host holds)."""
    res.status = INTERRUPTED if isinstance(exc, budget.Stopped) else "failed"
    res.message = redact(exc.render())
    done = []
    if changed:
        res.data["changed"] = changed
        done.append("written before it stopped: " + ", ".join(f"{c['kind']} {c['name']}" for c in changed))
    unsure = res.data.pop("on_the_wire", None)
    if unsure:
        res.data["outcome_unknown"] = unsure
        done.append(
            "outcome unknown of the apply script that was running (these may or may not be written: "
            + ", ".join(f"{c['kind']} {c['name']}" for c in unsure)
            + f"; `{prog()} os-verify` shows what the host holds)"
        )
    if done:
        res.message += "\n  " + "; ".join(done)
    return res


def measure_locality(remote, root: str, seconds: float) -> dict[str, Any]:
    def sample():
        try:
            return locality_counters(host_state(parse_snapshot(take_snapshot(remote, root, [], []))))
        except ValueError as exc:
            raise unexpected_content(exc, remote.host) from None

    a = sample()
    time.sleep(seconds)
    return locality_share(a, sample())


GATE_MIN_EVENTS = 100  # a share over fewer events in a window is noise: not judged


def gate_verdict(before: dict, after: dict, threshold: float) -> tuple[bool, str, dict]:
    detail = {"before": before, "after": after, "threshold": threshold, "min_events": GATE_MIN_EVENTS}
    if min(before["allocations"], after["allocations"]) < GATE_MIN_EVENTS:
        return (
            False,
            (
                f"cannot tell: fewer than {GATE_MIN_EVENTS} NUMA allocations were counted in a window "
                f"({before['allocations']} before, {after['allocations']} after; idle host?); run the "
                "workload during the canary or raise --gate-seconds"
            ),
            detail,
        )
    parts, ok = [], True
    for key, label, count in (
        ("alloc_local_share", "local allocations", "allocations"),
        ("hint_local_share", "local hint faults", "hint_faults"),
    ):
        b, a = before[key], after[key]
        if min(before[count], after[count]) < GATE_MIN_EVENTS:
            continue
        worse = b - a > threshold
        ok = ok and not worse
        parts.append(f"{label} {b:.1%} -> {a:.1%}" + (f" (worse by more than {threshold:.1%})" if worse else ""))
    return ok, ("ok: " if ok else "WORSE: ") + ", ".join(parts), detail


# --------------------------------------------------------------------------------------------- fleet
ACTIONS = {"plan": plan_host, "apply": apply_host, "verify": verify_host}


def run_os(
    hosts,
    action: str,
    opts: OsOptions,
    rollout: Rollout | None = None,
    *,
    progress: bool = True,
    slo_gate=None,
) -> FleetOutcome:
    """plan/apply/verify on every host under ``rollout``; its ``gate`` judges the canary hosts: locality here,
    slo through ``slo_gate`` (numaforge.canary.gate.SloGate, built by the task; the fleet runner calls it)."""
    rollout = rollout or Rollout()
    fn = ACTIONS[action]
    no_ssh = [h.name for h in hosts if h.ssh is None]
    if no_ssh:
        raise NumaforgeError(
            f"host(s) without an ssh section: {', '.join(no_ssh)}",
            "inventory",
            "add ssh: {address: ...} to each host the host OS pipeline should reach",
        )
    if rollout.gate not in (None, "locality", "slo"):
        raise NumaforgeError(f"unknown --gate {rollout.gate!r}", "--gate", "the gates are: locality, slo")
    if rollout.gate and rollout.canary < 1:
        raise NumaforgeError(
            f"--gate {rollout.gate} judges canary hosts: give --canary N (N >= 1)",
            "--gate",
            f"pass --canary 1 --gate {rollout.gate}",
        )
    if rollout.gate == "slo" and slo_gate is None:
        raise NumaforgeError("--gate slo needs its settings", "--gate slo", "pass --prometheus URL --slo metric=NAME")
    opts.gate = rollout.gate
    opts.canary_hosts = [h.name for h in hosts][: rollout.canary]
    return run_fleet(
        hosts, lambda h: fn(h, opts), rollout, progress=progress, gate=slo_gate if rollout.gate == "slo" else None
    )
