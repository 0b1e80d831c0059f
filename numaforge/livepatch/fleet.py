"""validate over a fleet (library; `invoke validate` and the lifecycle tasks are thin over it): pick each host's
artifact, decide the A/B measurement per host, run numaforge.livepatch.validate_host under the rolling rules
(canary, batches, max-fail: numaforge.fleet), and render JUnit XML.

Measurement policy: the A/B NUMA effect step burns CPU for minutes and unloads/reloads the patch, so it runs
only on hosts in the inventory group `lab` or when the caller asks (`--measure`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json as _json
from typing import Callable

from .. import journal
from ..errors import NumaforgeError
from ..fleet import FleetOptionError, Rollout, run_fleet
from ..paths import kpatch_build_dir
from ..program import prog
from ..remote.ssh import connect
from ..report import HostResult, Report, junit_xml  # noqa: F401 (junit_xml re-exported)
from . import lifecycle
from .artifact import Artifact, load_artifact
from .errors import ArtifactError
from .host import Options, validate_host

LAB_GROUP = "lab"
MEASURE_WARNING = (
    "--measure: the A/B step runs a CPU-burning NUMA workload twice per round and unloads/reloads "
    "the live patch on every selected host; use it on lab or drained hosts"
)


def measure_on(host, measure: bool | None) -> bool:
    """The A/B step for this host: --measure / --no-measure decide; by default only hosts in group `lab`."""
    if measure is not None:
        return bool(measure)
    return LAB_GROUP in (getattr(host, "groups", None) or [])


def resolve_module(module: str | None, target: str | None, check: str | None, host_target: str | None = None):
    """The Artifact to validate: --module, else --target's (or the host's target's) kpatch build manifest."""
    if module:
        return load_artifact(module, check_script=check)
    t = target or host_target
    if not t:
        raise ArtifactError(
            "no module to validate: neither --module nor --target, and the host has no kernel.target",
            "--module/--target",
            "pass --module PATH.ko or --target NAME (see kpatch/targets/)",
        )
    manifest = kpatch_build_dir() / t / "manifest.json"
    if not manifest.is_file():
        raise ArtifactError(
            f"target '{t}' has no built module ({manifest} missing)",
            "--target",
            f"build it with `{prog()} build-kpatch --target {t}`",
        )
    try:
        man = _json.loads(manifest.read_text())
    except ValueError as exc:
        raise ArtifactError(
            f"{manifest} is not JSON: {exc}", str(manifest), f"rebuild: {prog()} build-kpatch --target {t}"
        ) from None
    return load_artifact(manifest.parent / man["module_file"], check_script=check, manifest=manifest)


def validate_hosts(
    hosts,
    *,
    module=None,
    target=None,
    check=None,
    opts=None,
    accept_new_host_key=False,
    rollout: Rollout | None = None,
    progress=True,
    measure=None,
    log=print,
    gate=None,
):
    """Run the states on every host under the rolling rules. measure: None = the A/B step only on hosts in
    group `lab`; True/False = on every/no host. gate: numaforge.fleet's canary gate hook (needs opts.keep)."""
    if gate is not None and not (opts and opts.keep):
        raise FleetOptionError(
            "--gate slo judges canaries while the live patch stays loaded: validate unloads it without --keep",
            "--gate slo",
            "add --keep (and --install to persist it)",
        )
    opts = opts or Options()
    artifacts: dict = {}
    if module or target:  # one artifact for every host: bad input fails before any host is contacted
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
        host_opts = dataclasses.replace(opts, effect=measure_on(host, measure))
        result.data["measure"] = host_opts.effect
        with connect(host.ssh, host.name, accept_new_host_key=accept_new_host_key) as remote:
            hlog = lambda m: log(f"{host.name}: {m}")
            validate_host(remote, art, host_opts, result, log=hlog)
            if opts.keep and result.status != "failed":
                lifecycle.keep_record(remote, art)
                if opts.install:
                    with result.step("install") as s:
                        s.detail = lifecycle.persist(remote, art, result.data.get("preflight", {}).get("kpatch"), hlog)
                    result.data["final"] = "installed"
            return result

    return run_fleet(hosts, one, rollout, progress=progress, gate=gate)


def undo_install(host, *, module=None, target=None, accept_new_host_key=False, log=print) -> HostResult:
    """The canary gate's rollback of a loaded (and installed) live patch: unload it, remove its persistence."""
    art = resolve_module(module, target, None, getattr(host.kernel, "target", None))
    result = HostResult(host.name)
    with connect(host.ssh, host.name, accept_new_host_key=accept_new_host_key) as remote:
        return lifecycle.unload_host(remote, art.name, result, log=lambda m: log(f"{host.name}: {m}"))


# ---------------------------------------------------------------- lifecycle over a fleet


def _lifecycle(
    hosts,
    per_host,
    *,
    run_key: str | None,
    accept_new_host_key=False,
    rollout: Rollout | None = None,
    progress=True,
    resumed_check=None,
    journal_dir=None,
    gate=None,
):
    """run_fleet over per_host(remote, host, result) with an optional resume journal: a host recorded as done
    by an interrupted run of the same command is only checked (resumed_check), never redone. A writing rollout
    holds the journal for the run (journal.open_held)."""
    rollout = rollout or Rollout()
    with contextlib.ExitStack() as stack:
        jr = None
        if run_key and rollout.lock:
            jr = stack.enter_context(journal.open_held(run_key, journal_dir, task=rollout.lock, wait=rollout.wait_lock))
        elif run_key:
            jr = journal.open(run_key, journal_dir)
        return _lifecycle_run(hosts, per_host, jr, accept_new_host_key, rollout, progress, resumed_check, gate)


def _lifecycle_run(hosts, per_host, jr, accept_new_host_key, rollout, progress, resumed_check, gate=None):
    def one(host) -> HostResult:
        result = HostResult(host.name)
        with connect(host.ssh, host.name, accept_new_host_key=accept_new_host_key) as remote:
            if jr is not None and jr.done(host, journal.VERIFIED) and resumed_check is not None:
                result.data["resumed"] = True
                return resumed_check(remote, host, result)
            per_host(remote, host, result)
        if jr is not None and result.status != "failed":
            jr.record(host, journal.VERIFIED, status=result.status)
        return result

    outcome = run_fleet(hosts, one, rollout, progress=progress, gate=gate)
    if jr is not None:
        outcome.journal = str(jr.path)
        rolled_back = (getattr(gate, "record", None) or {}).get("decision") == "rollback"
        if rolled_back or (not outcome.stopped and all(r.status != "failed" for r in outcome.results)):
            jr.finish()  # a gate rollback is a decision, not an interruption: nothing to resume
    return outcome


def status_hosts(hosts, **fleet):
    """livepatch-status: read-only, no journal."""
    return _lifecycle(hosts, lambda remote, host, result: lifecycle.status_host(remote, result), run_key=None, **fleet)


def install_hosts(
    hosts,
    *,
    module: str | None = None,
    target: str | None = None,
    opts: Options | None = None,
    run_key: str | None = None,
    log: Callable[[str], None] = print,
    **fleet,
):
    """livepatch-install: load (validated) where it is not loaded, then persist across reboots."""
    opts = opts or Options()
    arts: dict[str | None, Artifact] = {}  # kernel target (None: --module for every host) -> its artifact

    def art_for(host):
        key = target or getattr(host.kernel, "target", None)
        if key not in arts:
            arts[key] = resolve_module(module, target, None, getattr(host.kernel, "target", None))
        return arts[key]

    if module or target:  # one artifact for every host: bad input fails before any host is contacted
        one_art = resolve_module(module, target, None)
        arts.update({(target or getattr(h.kernel, "target", None)): one_art for h in hosts})

    def per_host(remote, host, result):
        art = art_for(host)
        result.data["artifact"] = art.as_dict()
        host_opts = dataclasses.replace(opts, effect=False)
        return lifecycle.install_host(remote, art, host_opts, result, log=lambda m: log(f"{host.name}: {m}"))

    def check(remote, host, result):
        art = art_for(host)
        st = lifecycle.host_status(remote)
        rec = st["records"].get(art.name) or {}
        ok = rec.get("installed") and rec.get("sha256") == art.sha256
        result.status = "ok" if ok else "failed"
        result.message = (
            f"{art.name} installed (resumed run: checked only)"
            if ok
            else f"{art.name} is not installed although an interrupted run recorded it\n"
            "  fix: delete the journal and re-run"
        )
        return result

    return _lifecycle(hosts, per_host, run_key=run_key, resumed_check=check, **fleet)


def unload_hosts(hosts, *, module: str, force=False, opts=None, run_key=None, log=print, **fleet):
    """livepatch-unload: disable, wait, remove; refuses foreign live patches unless force."""
    name = module.replace("-", "_")

    def per_host(remote, host, result):
        return lifecycle.unload_host(
            remote, name, result, force=force, opts=opts, log=lambda m: log(f"{host.name}: {m}")
        )

    def check(remote, host, result):
        st = lifecycle.host_status(remote)
        gone = name not in st["livepatches"] and name not in st["records"]
        result.status = "ok" if gone else "failed"
        result.message = f"{name} not loaded (resumed run: checked only)" if gone else f"{name} is still loaded"
        return result

    return _lifecycle(hosts, per_host, run_key=run_key, resumed_check=check, **fleet)
