"""The SLO canary gate (``--canary N --gate slo``): after the canary hosts changed, judge them minute by minute
against the baseline hosts (the ones the rollout would change next) and widen, hold or roll back.

    gate = SloGate(settings_from(host_vars, ["window=5"], "http://prom:9090"), rollback=undo_one, log=print)
    outcome = run_fleet(hosts, apply_one, canary=1, gate=gate)     # numaforge.fleet calls gate after the canaries
    report.data["gate"] = gate.record

Every minute (``minute`` seconds, 60 by default; tests use seconds):
- **P99 delta** (ms): Prometheus's ``histogram_quantile(0.99, ...)`` over the canaries' series minus the same over
  the baselines' (numaforge.canary.prometheus), each host's series picked by ``LABEL=~"value"`` (host var
  ``slo_instance``, default the host name);
- **skew**: the skewness of the per-host local share of the minute's page allocations (numastat ``local_node`` /
  (``local_node`` + ``other_node``) deltas, read over SSH through the host OS pipeline's snapshot) over canaries
  and baselines together; a host that allocated fewer than 100 pages in the minute is left out;
- the minute's decision (numaforge.canary.decide): rollback at once (capture a trace on each canary with
  numa-audit's read, then undo each canary); else at the window's end widen when every minute widened, else
  extend the window (``extend`` times at most), and stop the rollout as held after the last extension.
The Pearson correlation of the two series and its p-value are reported (the talk's alert: |r| > 0.75, p < 0.01).

Settings: inventory var ``slo_gate:`` (a mapping) of the first canary host, then ``--slo KEY=VALUE`` options
(SETTING_HELP lists the keys), then ``--prometheus URL``.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Callable, Sequence

from .. import safeio
from ..audit.run import AuditOptions, audit_host
from ..errors import NumaforgeError
from ..fleet import FAILED, host_name
from ..hostos.read import host_state, parse_snapshot, take_snapshot, unexpected_content
from ..hostos.run import host_root, locality_counters
from ..remote.ssh import connect
from ..report import HostResult
from ..secrets import SecretRef, register
from . import decide
from .prometheus import CannotTell, Prometheus, label_problem, metric_problem, url_problem

MAX_CA_BYTES = 16 * 1024 * 1024  # a CA bundle (the system one is ~200 KiB)
MIN_ALLOCATIONS = 100  # a host's local share over fewer page allocations in a minute is noise: left out

SETTING_HELP = {
    "metric": "the service's latency histogram (seconds), base name without _bucket",
    "label": "the label that tells hosts apart in that histogram (default instance); host var slo_instance "
    "gives each host's value (default: its inventory name)",
    "window": "minutes in the window (default 10)",
    "minute": "seconds per minute (default 60; shorter only for tests)",
    "range": "seconds of the rate() range per query (default: one minute)",
    "extend": "how many times a holding window is extended before the rollout stops (default 1)",
    "widen_p99_ms": "P99 delta below which a minute may widen (default 15)",
    "rollback_p99_ms": "P99 delta above which the canaries are rolled back (default 25)",
    "widen_skew": "skew above which a minute may widen (default -0.3)",
    "rollback_skew": "skew below which the canaries are rolled back (default -0.8)",
    "alert_r": "|Pearson r| above which the report alerts (default 0.75)",
    "alert_p": "p-value below which the report alerts (default 0.01)",
    "prometheus": "Prometheus base URL (also --prometheus)",
    "prometheus_ca": "CA bundle for Prometheus's TLS certificate (default: the system CAs)",
    "prometheus_token": "bearer token by reference: env:VAR or file:/path",
}


class GateSettingError(NumaforgeError):
    exit_code = 2
    refusal = True  # every gate setting is checked before any host (issue 40)


@dataclass(frozen=True)
class SloSettings:
    prometheus: str = ""
    metric: str = ""
    label: str = "instance"
    window: int = 10
    minute: float = 60.0
    range: float = 0.0  # 0: one minute
    extend: int = 1
    prometheus_ca: str | None = None
    prometheus_token: str | None = None
    thresholds: decide.Thresholds = field(default_factory=decide.Thresholds)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["prometheus_token"] = self.prometheus_token and "(reference)"
        return d


_THRESHOLD_KEYS = {f.name for f in fields(decide.Thresholds)}


def _convert(key: str, raw: Any, where: str) -> Any:
    kinds: dict[str, type] = {"window": int, "extend": int, "minute": float, "range": float}
    kind = float if key in _THRESHOLD_KEYS else kinds.get(key, str)
    try:
        if isinstance(raw, bool):
            raise ValueError
        value = kind(raw)
    except (TypeError, ValueError):
        raise GateSettingError(
            f"slo gate setting {key} must be a {kind.__name__}, got {raw!r}", where, f"e.g. --slo {key}=..."
        ) from None
    if key in ("window", "minute") and value <= 0 or key in ("extend", "range") and value < 0:
        raise GateSettingError(f"slo gate setting {key} must be positive, got {raw!r}", where, f"e.g. --slo {key}=5")
    return value


def settings_from(
    host_vars: dict, pairs: Sequence[str] | None, prometheus: str | None, complete: bool = True
) -> SloSettings:
    """Settings from the first canary's ``slo_gate`` var, then ``--slo KEY=VALUE``, then ``--prometheus``: every
    one parsed and checked here, before any host is touched (issue 40) -- the URL (http/https, no credentials),
    the metric and label names, the token reference (resolved: a set variable, a private file) and the CA file.
    Each error is a GateSettingError (exit 2) naming where the setting came from. ``complete`` False: the
    options alone, before the inventory (whose slo_gate may give the metric or URL) is read."""
    given: dict[str, tuple[Any, str]] = {}
    base = host_vars.get("slo_gate") or {}
    if not isinstance(base, dict):
        raise GateSettingError("inventory var slo_gate must be a mapping", "slo_gate", "write slo_gate: {metric: ...}")
    given.update({str(k): (v, "inventory var slo_gate") for k, v in base.items()})
    for pair in pairs or []:
        key, sep, value = str(pair).partition("=")
        if not sep:
            raise GateSettingError(f"--slo takes KEY=VALUE, got {pair!r}", "--slo", "e.g. --slo window=10")
        given[key.strip().replace("-", "_")] = (value.strip(), "--slo")
    if prometheus:
        given["prometheus"] = (prometheus, "--prometheus")
    plain: dict[str, Any] = {}
    thresholds: dict[str, Any] = {}
    if isinstance(given.get("prometheus_token", (None,))[0], str):
        token = given["prometheus_token"][0]
        if not token.startswith(("env:", "file:")):
            register(token)  # a literal given by mistake: masked in every message and report
    for key, (raw, where) in given.items():
        if key not in SETTING_HELP:
            raise GateSettingError(
                f"unknown slo gate setting {key!r}", where, "known settings: " + ", ".join(sorted(SETTING_HELP))
            )
        value = _convert(key, raw, where)
        (thresholds if key in _THRESHOLD_KEYS else plain)[key] = value
    s = replace(SloSettings(), **plain, thresholds=replace(decide.Thresholds(), **thresholds))
    try:
        s.thresholds.check()
    except decide.ThresholdError as exc:
        raise GateSettingError(
            str(exc), "slo gate thresholds", "make widen thresholds stricter than rollback ones"
        ) from None
    for key, example in (("prometheus", "--prometheus http://prometheus:9090"), ("metric", "--slo metric=NAME")):
        if complete and not getattr(s, key):
            raise GateSettingError(f"--gate slo needs the {key} setting", "--gate slo", f"pass {example}")
    src = {k: w for k, (_v, w) in given.items()}
    if s.prometheus and (problem := url_problem(s.prometheus)):
        raise GateSettingError(
            problem,
            f"{src['prometheus']} (slo gate setting prometheus)",
            "give Prometheus's base URL, e.g. https://prometheus.example:9090; a bearer token goes in "
            "prometheus_token (env:VAR or file:PATH), never in the URL",
        )
    if s.metric and (problem := metric_problem(s.metric)):
        raise GateSettingError(
            problem,
            f"{src['metric']} (slo gate setting metric)",
            "name the latency histogram's base name, e.g. --slo metric=http_request_duration_seconds (no _bucket)",
        )
    if problem := label_problem(s.label):
        raise GateSettingError(problem, f"{src['label']} (slo gate setting label)", "e.g. --slo label=instance")
    if s.prometheus_token:
        where = f"{src['prometheus_token']} (slo gate setting prometheus_token)"
        try:
            SecretRef.parse(s.prometheus_token, where).resolve()  # unset variable, unsafe file: now, not after writes
        except NumaforgeError as exc:
            raise GateSettingError(exc.what, exc.where, exc.fix) from None
    if s.prometheus_ca:
        where = f"{src['prometheus_ca']} (slo gate setting prometheus_ca)"
        pem = safeio.read_input(
            s.prometheus_ca,
            what="CA bundle",
            where=where,
            error=GateSettingError,
            max_bytes=MAX_CA_BYTES,
            fix_kind="point prometheus_ca at the PEM file of the CA that signed Prometheus's certificate",
            fix_size="point prometheus_ca at a PEM CA file (a system bundle is ~200 KiB), not another file",
        )
        if b"-----BEGIN CERTIFICATE-----" not in pem:
            raise GateSettingError(
                f"CA bundle {s.prometheus_ca} holds no PEM certificate",
                where,
                "point prometheus_ca at the PEM file (-----BEGIN CERTIFICATE-----) of the CA that signed "
                "Prometheus's certificate",
            )
    return s


def instance_of(host: Any) -> str:
    return str((getattr(host, "vars", None) or {}).get("slo_instance") or host_name(host))


# ------------------------------------------------------------------ locality over SSH
def local_share(a: dict[str, int], b: dict[str, int]) -> float | None:
    """The minute's local share of page allocations; None below MIN_ALLOCATIONS or when a counter went
    backwards (a reset, or a host's garbage): left out, never a number made up."""
    local, other = b["local_node"] - a["local_node"], b["other_node"] - a["other_node"]
    if local < 0 or other < 0:
        return None
    return local / (local + other) if local + other >= MIN_ALLOCATIONS else None


class _Locality:
    """One open SSH connection per host for the gate's window; counters read in parallel."""

    def __init__(self, hosts: list, accept_new_host_key: bool, forks: int = 8):
        self.hosts = hosts
        self.stack = ExitStack()
        try:
            self.remotes = {
                h.name: self.stack.enter_context(connect(h.ssh, h.name, accept_new_host_key=accept_new_host_key))
                for h in hosts
            }
        except BaseException:
            self.stack.close()
            raise
        self.pool = ThreadPoolExecutor(max_workers=max(1, min(forks, len(hosts))), thread_name_prefix="slo")

    def _one(self, host) -> dict[str, int]:
        text = take_snapshot(self.remotes[host.name], host_root(host), [], [])
        try:
            return locality_counters(host_state(parse_snapshot(text)))
        except ValueError as exc:
            raise unexpected_content(exc, host.name) from None

    def counters(self) -> dict[str, dict[str, int]]:
        return dict(zip([h.name for h in self.hosts], self.pool.map(self._one, self.hosts)))

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.stack.close()


# ------------------------------------------------------------------ the gate
@dataclass
class SloGate:
    settings: SloSettings
    rollback: Callable[[Any], HostResult]  # undo one canary host
    log: Callable[[str], None] = print
    accept_new_host_key: bool = False
    capture: bool = True  # a numa-audit read of each canary before a rollback
    record: dict = field(default_factory=dict)

    def __call__(self, canaries: list[HostResult], canary_hosts: list, baseline_hosts: list) -> str | None:
        """The fleet hook: None widens; a reason stops the rollout (canary results updated on rollback)."""
        s = self.settings
        self.record.clear()  # the same dict the caller put in its report: an interrupted run still shows it
        self.record.update(
            kind="slo",
            settings=s.as_dict(),
            canaries=[h.name for h in canary_hosts],
            baselines=[h.name for h in baseline_hosts],
            minutes=[],
        )
        if not baseline_hosts:
            return self._stop("hold", "no baseline hosts to compare the canaries with (every host was a canary)")
        prom = Prometheus(
            s.prometheus, s.prometheus_ca, SecretRef.parse(s.prometheus_token) if s.prometheus_token else None
        )
        loc = None
        try:
            loc = _Locality(canary_hosts + baseline_hosts, self.accept_new_host_key)
            return self._loop(prom, loc, canaries, canary_hosts, baseline_hosts)
        except NumaforgeError as exc:  # the fleet runner stops the rollout with it; the record says why
            self.record.update(decision="error", reason=exc.render(), correlation=self._correlation())
            raise
        except KeyboardInterrupt as exc:  # Ctrl-C/SIGTERM: no decision; the canaries stay as they are
            sig = getattr(exc, "signal_name", "SIGINT")
            self.record.update(decision="interrupted", reason=f"interrupted ({sig}); canaries kept, not widened")
            raise
        finally:
            if loc is not None:
                loc.close()

    def _loop(self, prom, loc, canaries, canary_hosts, baseline_hosts) -> str | None:
        s = self.settings
        minutes, total = self.record["minutes"], s.window
        prev, start = loc.counters(), time.monotonic()
        self.log(
            f"slo gate: {len(canary_hosts)} canary / {len(baseline_hosts)} baseline host(s), "
            f"window {s.window} x {s.minute:g} s"
        )
        floor = decide.lowest_one_outlier_skew(len(canary_hosts) + len(baseline_hosts))
        if floor is None or floor >= s.thresholds.rollback_skew:
            note = (
                f"with {len(canary_hosts) + len(baseline_hosts)} hosts the skew cannot fall below "
                f"{s.thresholds.rollback_skew:g} (one low host among n reaches -(n-2)/sqrt(n-1)): only the P99 "
                "delta can roll back; select more baseline hosts"
            )
            self.record["note"] = note
            self.log(f"slo gate: note: {note}")
        for extension in range(s.extend + 1):
            while len(minutes) < total:
                time.sleep(max(0.0, start + (len(minutes) + 1) * s.minute - time.monotonic()))
                now = loc.counters()
                m = self._minute(prom, canary_hosts, baseline_hosts, prev, now, len(minutes) + 1)
                prev = now
                minutes.append(m)
                self.log(_line(m))
                if m["decision"] == decide.ROLLBACK:
                    return self._rollback(canaries, canary_hosts, m["why"])
            verdict = decide.window_verdict([m["decision"] for m in minutes[total - s.window : total]])
            if verdict == decide.WIDEN:
                self._finish("widen", f"every minute of the last {s.window} widened")
                return None
            if extension < s.extend:
                self.log(f"slo gate: hold; window extended by {s.window} minute(s)")
                total += s.window
        return self._stop(
            "hold", f"the gate held through {s.extend} extension(s) of the window; canaries kept, rollout not widened"
        )

    def _minute(self, prom, canary_hosts, baseline_hosts, prev, now, index: int) -> dict:
        s = self.settings
        at, rng = time.time(), s.range or s.minute
        unsure: list[str] = []
        c = self._p99(prom, canary_hosts, at, rng, "canaries'", unsure)
        b = self._p99(prom, baseline_hosts, at, rng, "baselines'", unsure)
        delta = c - b if c is not None and b is not None else None
        shares = {name: local_share(prev[name], now[name]) for name in now}
        skew = decide.skewness([v for v in shares.values() if v is not None])
        decision, why = decide.decide_minute(delta, skew, s.thresholds, "; ".join(unsure) or None)
        return {
            "minute": index,
            "time": round(at, 3),
            "p99_canary_ms": c,
            "p99_baseline_ms": b,
            "p99_delta_ms": delta,
            "local_share": shares,
            "skew": skew,
            "decision": decision,
            "why": why,
        }

    def _p99(self, prom, hosts, at: float, rng: float, whose: str, unsure: list[str]) -> float | None:
        """One side's P99 in ms; a value Prometheus's client refused (CannotTell) is None with the reason
        in ``unsure``: the minute cannot tell, so it never widens (numaforge.canary.decide)."""
        s = self.settings
        try:
            return prom.p99_ms(s.metric, s.label, [instance_of(h) for h in hosts], at, rng)
        except CannotTell as exc:
            unsure.append(f"cannot tell the {whose} P99: {exc.what}")
            return None

    def _correlation(self) -> dict:
        ms = self.record["minutes"]
        return decide.correlation([m["p99_delta_ms"] for m in ms], [m["skew"] for m in ms], self.settings.thresholds)

    def _finish(self, decision: str, reason: str) -> None:
        corr = self._correlation()
        self.record.update(decision=decision, reason=reason, correlation=corr)
        self.log(f"slo gate: {decision}: {reason}; {_corr_text(corr, self.settings.thresholds)}")

    def _stop(self, decision: str, reason: str) -> str:
        self._finish(decision, reason)
        return f"slo gate: {decision}: {reason}"

    def _rollback(self, canaries: list[HostResult], canary_hosts: list, why: str) -> str:
        captures, undone = {}, {}
        for host, res in zip(canary_hosts, canaries):
            if self.capture:
                try:
                    a = audit_host(host, AuditOptions(window=1.0, accept_new_host_key=self.accept_new_host_key))
                    captures[host.name] = {"findings": a.data.get("findings", []), "kernel": a.data.get("kernel")}
                except NumaforgeError as exc:
                    captures[host.name] = {"error": exc.render()}
            try:
                r = self.rollback(host)
                undone[host.name] = {"status": r.status, "message": r.message}
                ok = r.status != FAILED
            except NumaforgeError as exc:
                undone[host.name], ok = {"status": FAILED, "message": exc.render()}, False
            res.status = FAILED
            res.message += f"; slo gate: rolled back ({why})" + ("" if ok else "; the rollback FAILED: undo it by hand")
        self.record.update(captures=captures, rolled_back=undone)
        return self._stop("rollback", why)


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _line(m: dict) -> str:
    return (
        f"slo gate minute {m['minute']}: P99 canary {_fmt(m['p99_canary_ms'], '.1f')} ms, baseline "
        f"{_fmt(m['p99_baseline_ms'], '.1f')} ms, delta {_fmt(m['p99_delta_ms'], '+.1f')} ms; skew "
        f"{_fmt(m['skew'], '.2f')} -> {m['decision']} ({m['why']})"
    )


def _corr_text(c: dict, t: decide.Thresholds) -> str:
    if c["r"] is None:
        return f"correlation: not enough minutes with both numbers ({c['n']})"
    alert = f" ALERT (|r| > {t.alert_r:g}, p < {t.alert_p:g})" if c["alert"] else ""
    return f"correlation r={c['r']:.2f} p={c['p']:.3g} over {c['n']} minutes{alert}"


def table_rows(record: dict) -> list[list[str]]:
    """The per-minute series as rows for a report table."""
    return [
        [
            str(m["minute"]),
            _fmt(m["p99_canary_ms"], ".1f"),
            _fmt(m["p99_baseline_ms"], ".1f"),
            _fmt(m["p99_delta_ms"], "+.1f"),
            _fmt(m["skew"], ".2f"),
            m["decision"],
            m["why"],
        ]
        for m in record.get("minutes", [])
    ]
