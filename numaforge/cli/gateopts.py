"""The `--gate slo` options shared by validate, livepatch-install and os-apply (docs/canary-gate.md): their help
texts, the gate built from them (numaforge.canary.gate.SloGate), and its per-minute table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from rich.markup import escape
from rich.table import Table

from ..fleet import Rollout
from ..lazy import lazy_module
from . import common

if TYPE_CHECKING:
    from ..canary import gate as cgate
    from ..livepatch import fleet as lpfleet
else:  # imported by the task that uses them (numaforge.lazy)
    cgate = lazy_module("numaforge.canary.gate")
    lpfleet = lazy_module("numaforge.livepatch.fleet")

GATE_HELP = (
    "slo: after the canaries, judge their P99 latency (Prometheus) and NUMA locality skew against the other "
    "hosts minute by minute; widen, hold or roll the canaries back (docs/canary-gate.md)"
)


def check(rollout: Rollout, hosts: list | None = None, other_gates: tuple[str, ...] = ()) -> cgate.SloSettings | None:
    """Every gate setting parsed and checked, no host touched: --gate (one this task knows), --canary against the
    selected hosts, and for --gate slo the settings (inventory var slo_gate of the first host, --slo,
    --prometheus; numaforge.canary.gate.settings_from checks the URL, names, token reference and CA file).
    A GateSettingError (exit 2) names the setting. ``hosts`` None: the options alone (a preflight that runs
    before the inventory is read: what the options give, incomplete); the task body calls it again with the
    hosts. Returns the slo settings, or None when the gate is not slo."""
    gate, canary, prometheus, slo = rollout.gate, rollout.canary, rollout.prometheus, list(rollout.slo)
    if gate is not None and gate != "slo" and gate not in other_gates:
        raise cgate.GateSettingError(
            f"unknown --gate {gate!r}", "--gate", "the gates here are: " + ", ".join(("slo", *other_gates))
        )
    if gate != "slo":
        if prometheus or slo:
            raise cgate.GateSettingError(
                "--prometheus and --slo are settings of --gate slo", "--prometheus/--slo", "add --gate slo"
            )
        return None
    if hosts is not None and (canary < 1 or len(hosts) <= canary):
        raise cgate.GateSettingError(
            f"--gate slo compares canary hosts with baseline hosts: {len(hosts)} host(s) selected, --canary {canary}",
            "--gate slo",
            "select more hosts than --canary N (N >= 1): the hosts after the canaries are the baseline",
        )
    if hosts is None:  # the inventory's slo_gate var may still give the metric or the URL
        return cgate.settings_from({}, slo, prometheus, complete=False)
    return cgate.settings_from(hosts[0].vars or {}, slo, prometheus)


def slo_gate(
    rollout: Rollout,
    hosts: list,
    rollback: Callable[[Any], Any],
    accept_new_host_key: bool = False,
    other_gates: tuple[str, ...] = (),
) -> Any:
    """The SloGate for `--gate slo` (None without a gate or for one of the task's ``other_gates``) from the
    rollout's gate options; an unknown gate or bad settings stop with exit 2 before any host (check())."""
    settings = check(rollout, hosts, other_gates)
    if settings is None:
        return None
    return cgate.SloGate(
        settings,
        rollback=rollback,
        log=lambda m: common.console.print(escape(m)),
        accept_new_host_key=accept_new_host_key,
    )


def livepatch_slo_gate(
    report: Any,
    rollout: Rollout,
    hosts: list,
    *,
    module: str | None,
    target: str | None,
    accept_new_host_key: bool,
    log: Callable[[str], None],
) -> Any:
    """slo_gate for validate --keep and livepatch-install: a rolled-back canary's live patch is unloaded and its
    boot persistence removed; the record goes into the report before the rollout (an interrupted run keeps it)."""
    undo = lambda h: lpfleet.undo_install(
        h, module=module, target=target, accept_new_host_key=accept_new_host_key, log=log
    )
    g = slo_gate(rollout, hosts, undo, accept_new_host_key)
    if g is not None:
        report.data["gate"] = g.record
    return g


def print_gate(record: dict) -> None:
    if not record:
        return
    t = Table(title=f"slo gate: {escape(str(record.get('decision', '-')))}")
    for col in ("minute", "P99 canary ms", "P99 baseline ms", "delta ms", "skew", "decision", "why"):
        t.add_column(col, overflow="fold")
    for row in cgate.table_rows(record):
        t.add_row(*(escape(c) for c in row))
    common.console.print(t)
    common.console.print(escape(f"slo gate: {record.get('decision')}: {record.get('reason')}"))
    corr = record.get("correlation") or {}
    if corr.get("r") is not None:
        common.console.print(
            escape(f"slo gate: Pearson r={corr['r']:.2f} p={corr['p']:.3g} over {corr['n']} minutes")
            + (" [red]ALERT[/]" if corr.get("alert") else "")
        )
