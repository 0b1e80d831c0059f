"""Task: validate — load, verify, measure and unload a live patch on hosts over SSH (numaforge.livepatch)."""

from __future__ import annotations

import json as _json
import xml.etree.ElementTree as ET
from pathlib import Path

from invoke import task

from .. import safeio
from ..display import esc
from ..errors import NumaforgeError
from ..fleet import host_timeout_seconds, run_fleet
from ..report import HostResult, Report
from . import common, values

HELP = {
    **{k: common.SELECT_HELP[k] for k in ("inventory", "host", "group", "limit", "json", "allow_plaintext_secrets")},
    "module": "live-patch .ko to validate (its manifest.json next to it is used when present)",
    "target": "kpatch target whose built module to use (kpatch/build/TARGET/manifest.json); default: each "
              "host's kernel.target from the inventory",
    "check": "LOADED check script run on the host after loading (default: the series' *-LOADED.test)",
    "keep": "leave the patch loaded after validation (default: unload it)",
    "install": "with --keep: also `kpatch install` it where the host has kpatch (persist across reboots)",
    "accept_new_host_key": "trust and record an unknown host key (a changed key is always refused)",
    "canary": "validate this many hosts first, one by one; any failure stops the rollout (default 1)",
    "batch": "then validate the rest in batches of this many hosts (0 = all at once; default 0)",
    "max_fail": "stop the rollout when more than this percentage of attempted hosts failed (default 0)",
    "forks": "hosts validated at the same time within a batch (default 4)",
    "host_timeout": "seconds of budget per host (default: none); a host past it stops before its next SSH "
                    "command, rolls back (unload/revert) and fails",
    "effect": "measure the NUMA effect (A/B tracepoint counts) on hosts with >= 3 NUMA nodes (--no-effect skips)",
    "effect_seconds": "workload run length per A/B run, in seconds (default 60, which shows the effect on the lab VM)",
    "rounds": "A/B rounds (each = one run with the patch off and one with it on, interleaved in one boot; default 1)",
    "signal_after": "seconds of unfinished transition before stalled tasks are signalled (default 15)",
    "revert_after": "seconds of unfinished transition before the patch is reverted and the host fails (default 60)",
    "junit": "also write a JUnit XML file (one testcase per host) for CI systems",
}


def resolve_module(module: str | None, target: str | None, check: str | None, host_target: str | None = None):
    """The Artifact to validate: --module, else --target's (or the host's target's) kpatch build manifest."""
    from .. import livepatch
    from ..paths import ROOT

    if module:
        return livepatch.load_artifact(module, check_script=check)
    t = target or host_target
    if not t:
        raise livepatch.ArtifactError("no module to validate: neither --module nor --target, and the host has "
                                      "no kernel.target", "--module/--target",
                                      "pass --module PATH.ko or --target NAME (see kpatch/targets/)")
    manifest = ROOT / "kpatch" / "build" / t / "manifest.json"
    if not manifest.is_file():
        raise livepatch.ArtifactError(f"target '{t}' has no built module ({manifest} missing)", "--target",
                                      f"build it with `invoke build-kpatch --target {t}`")
    try:
        man = _json.loads(manifest.read_text())
    except ValueError as exc:
        raise livepatch.ArtifactError(f"{manifest} is not JSON: {exc}", str(manifest),
                                      f"rebuild: invoke build-kpatch --target {t}") from None
    return livepatch.load_artifact(manifest.parent / man["module_file"], check_script=check, manifest=manifest)


def junit_xml(report: Report, suite: str = "numaforge.validate") -> str:
    """JUnit XML: one testcase per host; failed -> <failure>, not-run/skipped -> <skipped>; evidence in system-out."""
    cases = report.hosts
    failures = sum(1 for h in cases if h.status == "failed")
    skipped = sum(1 for h in cases if h.status in ("not-run", "skipped"))
    total = sum(s.seconds for h in cases for s in h.steps)
    ts = ET.Element("testsuite", name=suite, tests=str(len(cases)), failures=str(failures), errors="0",
                    skipped=str(skipped), time=f"{total:.3f}")
    if report.error is not None:
        ts.set("errors", "1")
        err = ET.SubElement(ET.SubElement(ts, "testcase", classname=suite, name="(run)"), "error",
                            message=report.error.what)
        err.text = report.error.render()
    for h in cases:
        case = ET.SubElement(ts, "testcase", classname=suite, name=h.host,
                             time=f"{sum(s.seconds for s in h.steps):.3f}")
        if h.status == "failed":
            f = ET.SubElement(case, "failure", message=h.message.splitlines()[0] if h.message else "failed",
                              type=h.data.get("error", {}).get("kind", "failed"))
            f.text = h.message
        elif h.status in ("not-run", "skipped"):
            ET.SubElement(case, "skipped", message=h.message or h.status)
        out = ET.SubElement(case, "system-out")
        out.text = _json.dumps(h.as_dict(), indent=1, default=str)
    ET.indent(ts)
    return ET.tostring(ts, encoding="unicode", xml_declaration=True) + "\n"


def _write_atomic(path: str, text: str) -> str:
    return safeio.write_output(path, text, "--junit")


def validate_hosts(hosts, *, module=None, target=None, check=None, opts=None, accept_new_host_key=False,
                   forks=4, canary=0, batch=0, max_fail=100.0, progress=True, host_timeout=None):
    """Library entry (the task and the tests call it): run the states on every host under the rolling rules."""
    from .. import livepatch
    from ..remote.ssh import connect

    opts = opts or livepatch.Options()
    artifacts: dict = {}
    if module or target:   # one artifact for every host: bad input fails before any host is contacted
        art = resolve_module(module, target, check)
        artifacts = {(target or h.kernel.target): art for h in hosts}

    def one(host) -> HostResult:
        result = HostResult(host.name)
        key = target or getattr(host.kernel, "target", None)
        if key not in artifacts:
            try:
                artifacts[key] = resolve_module(module, target, check, getattr(host.kernel, "target", None))
            except NumaforgeError as exc:
                artifacts[key] = exc
        art = artifacts[key]
        if isinstance(art, NumaforgeError):
            result.status, result.message = "failed", art.render()
            result.data["error"] = {"kind": type(art).__name__, "what": art.what, "where": art.where, "fix": art.fix}
            return result
        result.data["artifact"] = art.as_dict()
        with connect(host.ssh, host.name, accept_new_host_key=accept_new_host_key) as remote:
            return livepatch.validate_host(remote, art, opts, result,
                                           log=lambda m: common.console.print(esc(f"{host.name}: {m}")))

    return run_fleet(hosts, one, forks=int(forks), canary=int(canary), batch=int(batch),
                     max_fail_pct=float(max_fail), progress=progress, host_timeout=host_timeout)


@task(iterable=["host", "group"], help=HELP, auto_shortflags=False)
def validate(c, inventory=None, host=None, group=None, limit=None, module=None, target=None, check=None,
             keep=False, install=False, accept_new_host_key=False, canary=None, batch=None, max_fail=None,
             forks=None, host_timeout=None, effect=True, effect_seconds=None, rounds=None, signal_after=None,
             revert_after=None, junit=None, json=None, allow_plaintext_secrets=False):
    """Validate a built live patch on hosts: preflight, load, transition, verify, NUMA A/B effect, unload/keep."""
    from .. import livepatch, numa_effect

    def options():
        secs = values.positive_int(effect_seconds, "--effect-seconds", 60)
        work = numa_effect.WorkloadParams(duration=secs)
        if secs < 60:  # short runs (mechanism checks): scale the phases down with the run
            work = numa_effect.WorkloadParams(warm=max(1, secs // 10), unpinned=max(1, secs // 7),
                                              pinned=max(1, secs // 15), duration=secs)
        return livepatch.Options(keep=keep, install=install,
                                 signal_after=values.positive_float(signal_after, "--signal-after", 15.0),
                                 revert_after=values.positive_float(revert_after, "--revert-after", 60.0),
                                 effect=effect, effect_rounds=values.positive_int(rounds, "--rounds", 1),
                                 workload=work)

    def body(report: Report):
        try:
            safeio.check_output(junit, "--junit")   # before any work
            opts = options()
            budget = host_timeout_seconds(host_timeout)
            fleet_opts = dict(forks=values.positive_int(forks, "--forks", 4),
                              canary=values.non_negative_int(canary, "--canary", 1),
                              batch=values.non_negative_int(batch, "--batch", 0),
                              max_fail=values.max_fail(max_fail, "--max-fail", 0.0))
            _inv, hosts = common.load_selected(c, report, inventory, host, group, limit, allow_plaintext_secrets)
            report.expect_hosts(h.name for h in hosts)
            outcome = validate_hosts(hosts, module=module, target=target, check=check, opts=opts,
                                     accept_new_host_key=accept_new_host_key, progress=len(hosts) > 1,
                                     host_timeout=budget, **fleet_opts)
            report.hosts.extend(outcome.results)
            report.data["fleet"] = outcome.as_dict()
            if outcome.reason:
                common.console.print(f"rollout: {esc(outcome.summary())}")
            for h in outcome.results:
                eff = h.data.get("numa_effect") or {}
                if "third_node_moves" in eff:
                    common.console.print(
                        f"{h.host}: third-node moves off {eff['third_node_moves']['off']} / on "
                        f"{eff['third_node_moves']['on']}; stick dst=-1 off {eff['stick_local']['off']} / on "
                        f"{eff['stick_local']['on']}")
        except NumaforgeError as exc:
            report.error = exc   # so the JUnit file records it too; execute() reports it as usual
            raise
        finally:
            if junit:
                safeio.check_output(junit, "--junit")
                common.console.print(f"junit: {esc(_write_atomic(junit, junit_xml(report)))}")

    common.execute("validate", body, json=json,
                   options={"module": module, "target": target, "keep": keep, "canary": canary, "batch": batch,
                            "max_fail": max_fail, "effect_seconds": effect_seconds, "rounds": rounds,
                            "effect": effect})


TASKS = [validate]
