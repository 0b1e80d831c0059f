"""One host's validate run over one open Remote: the state machine (preflight -> upload -> load ->
transition -> verify -> effect -> unload | keep) with guaranteed rollback."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import budget
from ..errors import NumaforgeError
from ..measure import runner as mrunner
from ..report import HostResult
from ..workload import workload_binary
from . import hostops
from .artifact import Artifact
from .checks import (
    FACTS_SCRIPT,
    dmesg_problems,
    func_name,
    parse_facts,
    parse_objects,
    preflight_problems,
    prod_due,
    superseded,
    transition_action,
)
from .errors import HostPreflightError, LoadError, TaintError, TransitionError, UnloadError, VerifyError

LIVEPATCH_SYSFS = "/sys/kernel/livepatch"


@dataclass
class Options:
    keep: bool = False
    install: bool = False  # with keep: persist it (numaforge.livepatch.lifecycle.persist, fleet layer)
    signal_after: float = 15.0
    revert_after: float = 60.0
    poll: float = 0.5
    replace: bool = False  # allow a replace-mode module to supersede the host's other live patches
    effect: bool = False  # the A/B step: the fleet layer turns it on for the lab group or --measure
    effect_rounds: int = 1
    workload: mrunner.WorkloadParams = field(default_factory=mrunner.WorkloadParams)
    workload_binary: Path | None = None  # local static binary; None = build numaforge/workload
    command_timeout: float = 60.0


class HostRun:
    """The state machine for one host on one open Remote."""

    def __init__(self, remote, art: Artifact, opts: Options, result: HostResult, log: Callable[[str], None]):
        self.r, self.art, self.opts, self.result, self.log = remote, art, opts, result, log
        self.sysfs = f"{LIVEPATCH_SYSFS}/{art.name}"
        self.rdir: str | None = None
        self.rko: str | None = None
        self.kpatch: str | None = None
        self.loaded = False
        self.states: list[str] = []
        self.data = result.data
        self.taint_before: str | None = None
        self.others: dict = {}

    # helpers
    def sh(self, cmd: str, check: bool = True, timeout: float | None = None):
        return self.r.run(cmd, timeout=timeout or self.opts.command_timeout, sudo=True, check=check)

    def state(self, name: str) -> None:
        self.states.append(name)
        self.data["states"] = list(self.states)

    def dmesg_lines(self) -> int:
        r = self.sh("dmesg | wc -l", check=False)
        return int(r.stdout.strip() or 0) if r.stdout.strip().isdigit() else 0

    def patch_state(self) -> tuple[str | None, str | None]:
        r = self.sh(f"cat {self.sysfs}/enabled {self.sysfs}/transition 2>/dev/null", check=False)
        vals = r.stdout.split()
        return (vals[0] if vals else None, vals[1] if len(vals) > 1 else None)

    def busy_retry(self, cmd: str, what: str, timeout: float | None = None) -> tuple[int, str, int]:
        """Run cmd, retrying EBUSY answers like kpatch (5 tries, 2 s apart); records the tries."""

        def attempt():
            r = self.sh(cmd, check=False, timeout=timeout)
            return r.rc, (r.stderr + r.stdout)

        rc, out, tries = hostops.with_busy_retries(attempt, log=lambda m: self.log(f"{what}: {m}"))
        self.data.setdefault("busy_retries", {})[what] = tries
        return rc, out, tries

    def taint(self) -> str:
        return self.sh("cat /proc/sys/kernel/tainted", check=False).stdout.strip()

    def check_taint(self, when: str) -> dict:
        now = self.taint()
        detail = {"before": hostops.taint_detail(self.taint_before), "now": hostops.taint_detail(now)}
        bad = hostops.new_taint(self.taint_before, now)
        self.data.setdefault("taint", {})[when] = detail
        if bad:
            raise TaintError(
                f"the kernel became tainted {', '.join(hostops.describe_taint(bad))} {when}",
                f"{self.r.where}: /proc/sys/kernel/tainted {self.taint_before} -> {now}",
                "read dmesg on the host: a live patch only adds K (and O/E); this taint means the "
                "kernel hit a problem while patching (the module was rolled back)",
            )
        return detail

    def livepatches(self) -> dict:
        return hostops.parse_livepatches(self.sh(hostops.LIVEPATCHES_SCRIPT, check=False).stdout)

    def check_others(self) -> dict:
        """Every other live patch that was enabled before is still loaded and enabled (non-replace)."""
        now = self.livepatches()
        lost = sorted(
            n for n, lp in self.others.items() if lp.get("enabled") == "1" and (now.get(n) or {}).get("enabled") != "1"
        )
        if lost and not self.opts.replace:
            raise VerifyError(
                f"other live patch(es) no longer enabled: {', '.join(lost)}",
                f"{self.r.where}: {LIVEPATCH_SYSFS}",
                "the module superseded them (replace mode): rebuild it non-replace (the default)",
            )
        return {n: {"enabled": (now.get(n) or {}).get("enabled")} for n in self.others}

    def module_loaded(self) -> bool:
        r = self.sh(f"grep -q '^{self.art.name} ' /proc/modules", check=False)
        return r.rc == 0

    # states
    def preflight(self) -> dict:
        facts = parse_facts(self.sh(FACTS_SCRIPT, check=False).stdout)
        self.kpatch = facts.get("kpatch") or None
        self.taint_before = facts.get("tainted") or "0"
        self.others = {n: lp for n, lp in facts["livepatches"].items() if n != self.art.name}
        detail = {
            "uname_r": facts.get("uname_r"),
            "vermagic": self.art.vermagic,
            "sig_enforce": facts.get("sig_enforce") or None,
            "lockdown": facts.get("lockdown") or None,
            "kpatch": self.kpatch,
            "signed": self.art.signed,
            "signer": self.art.signer,
            "replace": self.art.replace,
            "taint": hostops.taint_detail(self.taint_before),
            "other_patches": sorted(self.others),
            "other_livepatches": {n: {k: lp[k] for k in ("enabled", "transition")} for n, lp in self.others.items()},
        }
        sup = superseded(facts, self.art)
        if sup and self.opts.replace:
            detail["supersedes"] = sup
            self.log(f"--replace: {self.art.name} will disable the loaded live patch(es) {', '.join(sup)}")
        self.data["preflight"] = detail
        probs = preflight_problems(facts, self.art, allow_replace=self.opts.replace)
        if probs:
            first = probs[0]
            if len(probs) > 1:
                first = HostPreflightError(
                    "; ".join(p.what for p in probs), first.where, " / ".join(p.fix for p in probs if p.fix)
                )
            first.where = f"{self.r.where}: {(first.where or '').removeprefix('host ')}"
            raise first
        return detail

    def upload(self) -> dict:
        self.rdir = self.sh("mktemp -d /tmp/numaforge-livepatch.XXXXXX").stdout.strip()
        if self.rdir and not self.r.is_root:
            self.sh(f"chown {shlex.quote(self.r.user)} {shlex.quote(self.rdir)}")
        self.rko = f"{self.rdir}/{self.art.path.name}"
        sha = self.r.put(self.art.path, self.rko, mode=0o600, sudo=True)
        self.data["remote_dir"] = self.rdir
        return {"path": self.rko, "sha256": sha}

    def load(self) -> dict:
        self.dmesg_mark = self.dmesg_lines()
        how = "kpatch load" if self.kpatch else "insmod"
        assert self.rko is not None  # upload() ran
        cmd = f"kpatch load {shlex.quote(self.rko)}" if self.kpatch else f"insmod {shlex.quote(self.rko)}"
        rc, out, tries = self.busy_retry(cmd, "load", timeout=self.opts.revert_after + 120)
        self.loaded = self.module_loaded()
        if rc != 0 and not self.loaded:
            tail = self.sh(f"dmesg | tail -n +{self.dmesg_mark + 1} | tail -5", check=False).stdout.strip()
            busy = hostops.is_busy(out)
            raise LoadError(
                f"{how} failed (rc={rc}, {tries} tr{'y' if tries == 1 else 'ies'}): {out.strip()[-300:]}"
                + (f"\n  dmesg: {tail}" if tail else ""),
                f"{self.r.where}: {self.rko}",
                "another live-patch transition kept the kernel busy: retry once it finished "
                "(cat /sys/kernel/livepatch/*/transition)"
                if busy
                else "read the kernel log on the host (dmesg); check the module matches the running kernel",
            )
        return {"via": how, "rc": rc, "tries": tries}

    def wait_transition(self, target: str = "1", name: str = "patch") -> dict:
        t0 = time.monotonic()
        signalled = False
        last_prod: float | None = None
        detail: dict = {"target": name}
        while True:
            enabled, transition = self.patch_state()
            elapsed = time.monotonic() - t0
            if enabled is None and target == "0":
                detail.update(done=True, seconds=round(elapsed, 1))
                return detail
            if enabled == target and transition == "0":
                detail.update(done=True, seconds=round(elapsed, 1))
                return detail
            action = transition_action(elapsed, signalled, self.opts.signal_after, self.opts.revert_after)
            if action == "wait" and prod_due(elapsed, last_prod):
                self.sh(hostops.PROD_IDLE_CPUS, check=False)
                last_prod = elapsed
                detail["idle_cpus_prodded"] = detail.get("idle_cpus_prodded", 0) + 1
            if action == "signal":
                signalled = True
                detail["stalled_tasks"] = self.stalled_tasks()
                has_signal = self.sh(f"test -e {self.sysfs}/signal", check=False).rc == 0
                if has_signal:
                    self.sh(f"echo 1 > {self.sysfs}/signal", check=False)
                    detail["signalled"] = f"wrote 1 to {self.sysfs}/signal after {elapsed:.0f} s"
                else:
                    detail["signalled"] = (
                        f"no {self.sysfs}/signal in this kernel: it signals stalled tasks "
                        f"itself (checked after {elapsed:.0f} s)"
                    )
                self.log(f"transition not done after {elapsed:.0f} s: {detail['signalled']}")
            elif action == "revert":
                detail.update(done=False, seconds=round(elapsed, 1), stalled_tasks=self.stalled_tasks())
                return detail
            time.sleep(self.opts.poll)

    def stalled_tasks(self) -> list[dict]:
        """Every thread whose patch_state is not the transition's target, with its kernel stack (at most 20)."""
        return hostops.parse_stalled(self.sh(hostops.stalled_script(self.sysfs), check=False).stdout)

    def verify(self) -> dict:
        enabled, transition = self.patch_state()
        objs = parse_objects(
            self.sh(
                f'cd {self.sysfs} && for o in */; do for f in "$o"*/; do [ -d "$f" ] && echo "${{f%/}}"; done; done',
                check=False,
            ).stdout
        )
        patched = sorted({func_name(f) for fs in objs.values() for f in fs})
        dmesg = self.sh(f"dmesg | tail -n +{self.dmesg_mark + 1}", check=False).stdout
        bad = dmesg_problems(dmesg, self.art.name)
        detail: dict = {
            "enabled": enabled,
            "transition": transition,
            "objects": objs,
            "patched_functions": patched,
            "dmesg_problems": bad,
        }
        self.data["verify"] = detail
        problems = []
        if enabled != "1":
            problems.append(f"enabled={enabled}")
        if transition != "0":
            problems.append(f"transition={transition}")
        missing = [f for f in self.art.functions if func_name(f) not in patched]
        if missing or not patched:
            problems.append(f"patched function(s) {', '.join(missing) or '(any)'} not under {self.sysfs}/<object>/")
        if bad:
            problems.append(f"kernel log: {bad[0]}")
        detail["other_livepatches"] = self.check_others()
        detail["taint"] = self.check_taint("after the load")
        if self.art.check_script is not None:
            rpath = f"{self.rdir}/{self.art.check_script.name}"
            self.r.put(self.art.check_script, rpath, mode=0o700, sudo=True)
            r = self.sh(
                f"LIVEPATCH_MODULE={shlex.quote(self.art.name)} sh {shlex.quote(rpath)} {shlex.quote(self.art.name)}",
                check=False,
            )
            detail["loaded_check"] = {
                "script": self.art.check_script.name,
                "rc": r.rc,
                "output": (r.stdout + r.stderr).strip()[-500:],
            }
            if r.rc != 0:
                problems.append(f"{self.art.check_script.name} exited {r.rc}: {(r.stderr or r.stdout).strip()[-200:]}")
        if problems:
            raise VerifyError(
                "; ".join(problems),
                f"{self.r.where}: {self.sysfs}",
                "see the verify detail in the report; the module was unloaded",
            )
        return detail

    def disable_and_unload(self) -> dict:
        detail: dict = {}
        enabled, _ = self.patch_state()
        if enabled == "1":
            rc, out, tries = self.busy_retry(f"echo 0 > {self.sysfs}/enabled", "disable")
            detail["disable"] = self.wait_transition("0", "unpatch")
            detail["disable"]["tries"] = tries
        if self.module_loaded():
            # 5.10 drops the livepatch core's module reference asynchronously after the unpatch transition
            ref = self.sh(
                hostops.refcount_script(self.art.name), check=False, timeout=hostops.REFCOUNT_WAIT + 30
            ).stdout.strip()
            detail["refcount"] = ref
            cmd = f"kpatch unload {self.art.name}" if self.kpatch else f"rmmod {self.art.name}"
            rc, out, tries = self.busy_retry(cmd, "unload")
            detail["unload"] = {"via": cmd.split()[0], "rc": rc, "tries": tries}
        still = self.module_loaded()
        self.loaded = still
        if still:
            raise UnloadError(
                f"module {self.art.name} is still loaded after disable + unload",
                self.r.where,
                f"check `cat {self.sysfs}/transition` and dmesg on the host; rmmod {self.art.name} "
                "once the transition finished",
            )
        return detail

    def set_patch(self, on: bool) -> None:
        if on and not self.module_loaded():
            self.load()
            d = self.wait_transition("1")
            if not d.get("done"):
                raise TransitionError(
                    "the patch transition did not finish while re-enabling it for the A/B run",
                    self.r.where,
                    "see the stalled tasks in the report",
                )
        elif not on and self.module_loaded():
            self.disable_and_unload()

    def cleanup_files(self) -> None:
        if self.rdir:
            self.sh(f"rm -rf -- {shlex.quote(self.rdir)}", check=False)
            self.data["remote_dir_removed"] = True


def validate_host(
    remote, art: Artifact, opts: Options, result: HostResult, log: Callable[[str], None] = lambda m: None
) -> HostResult:
    """Run the states on one open Remote; fills result (steps, data, status). Raises nothing for host failures."""
    h = HostRun(remote, art, opts, result, log)
    result.data.update({"module": art.name, "sha256": art.sha256, "vermagic": art.vermagic})
    try:
        with result.step("preflight") as s:
            h.state("preflight")
            s.detail = h.preflight()
        with result.step("upload") as s:
            h.state("upload")
            s.detail = h.upload()
        with result.step("load") as s:
            h.state("load")
            s.detail = h.load()
        with result.step("transition") as s:
            h.state("transition")
            d = h.wait_transition("1")
            s.detail = d
            result.data["transition"] = d
            if not d.get("done"):
                h.state("revert")
                rev = h.disable_and_unload()
                d["reverted"] = rev
                result.data["reverted"] = True
                raise TransitionError(
                    f"transition of {art.name} not finished after {opts.revert_after:g} s "
                    f"(stalled: {hostops.stalled_summary(d.get('stalled_tasks', [])) or 'unknown'}); "
                    "reverted and unloaded",
                    f"{remote.where}: {h.sysfs}/transition",
                    "find what keeps the patched function on a task's stack (the stalled tasks above); "
                    "retry when they are idle, or rebuild the patch to avoid that function",
                )
        with result.step("verify") as s:
            h.state("verify")
            s.detail = h.verify()
        if opts.effect:
            with result.step("effect") as s:
                h.state("effect")
                s.detail = _effect(h, remote, opts, log)
                result.data["numa_effect"] = s.detail
                if s.detail.get("skipped"):
                    s.status = "skipped"
        if opts.keep:
            with result.step("keep") as s:
                h.state("keep")
                h.set_patch(True)
                s.detail = {
                    "kept": True,
                    "other_livepatches": h.check_others(),
                    "taint": h.check_taint("after the keep"),
                }
            result.status = "changed"
            result.message = f"{art.name} loaded, verified and kept"
        else:
            with result.step("unload") as s:
                h.state("unload")
                s.detail = h.disable_and_unload()
                s.detail["other_livepatches"] = h.check_others()
                s.detail["taint"] = h.check_taint("after the unload")
            result.status = "ok"
            result.message = f"{art.name} loaded, verified and unloaded"
        result.data["final"] = "kept" if opts.keep else "unloaded"
    except NumaforgeError as exc:
        result.status = "failed"
        result.message = exc.render()
        result.data["error"] = {"kind": type(exc).__name__, "what": exc.what, "where": exc.where, "fix": exc.fix}
        _rollback(h, result)
    finally:
        try:
            with budget.lifted():
                h.cleanup_files()
        except NumaforgeError:
            result.data["remote_dir_removed"] = False
    return result


def _rollback(h: HostRun, result: HostResult) -> None:
    if not h.rdir:
        result.data["final"] = "untouched"
        return
    with result.step("rollback") as s, budget.lifted():  # a host out of time is still put back
        h.state("rollback")
        try:
            s.detail = h.disable_and_unload() if h.module_loaded() else {"loaded": False}
            result.data["final"] = "reverted" if result.data.get("reverted") else "rolled-back"
        except NumaforgeError as exc:
            s.status = "failed"
            s.detail = exc.render()
            result.data["final"] = "unknown"
            result.message += f"\n  rollback failed: {exc.what}"


def upload_workload(h: HostRun, remote, binary: Path | None) -> str:
    if binary is None:
        binary = workload_binary()
    rpath = f"{h.rdir}/numa_workload"
    remote.put(binary, rpath, mode=0o700, sudo=True)
    return rpath


def _numa_ready(remote) -> dict | None:
    """None when the host can show a NUMA effect, else the 'skipped' detail."""
    numa = mrunner.host_numa(remote)
    if numa["nodes"] < 3:
        return {"skipped": True, "reason": f"host has {numa['nodes']} NUMA node(s); the effect needs >= 3", **numa}
    if numa["numa_balancing"] != "1":
        return {
            "skipped": True,
            "reason": "automatic NUMA balancing is off on the host "
            f"(kernel.numa_balancing={numa['numa_balancing']}); numaforge does not change it",
            **numa,
        }
    return None


def _effect(h: HostRun, remote, opts: Options, log) -> dict:
    skip = _numa_ready(remote)
    if skip:
        return skip
    rpath = upload_workload(h, remote, opts.workload_binary)
    runs = mrunner.run_rounds(
        remote,
        rpath,
        opts.workload,
        ["off", "on"],
        opts.effect_rounds,
        lambda arm: h.set_patch(arm == "on"),
        order="abba",
        log=log,
    )
    out = mrunner.report(runs, ["off", "on"])
    out.update(mrunner.legacy_counts(runs))
    out["workload"] = mrunner.params_dict(opts.workload)
    out["rounds"] = opts.effect_rounds
    out.update(mrunner.host_numa(remote))
    return out


# Wakes every CPU: a short busy loop pinned to each CPU makes its idle task leave and re-enter the idle loop,
# where it takes a pending livepatch state. Under qemu TCG with 8 vCPUs the idle tasks otherwise held a
# transition for ~80 s (measured on the nps2 lab VM, 2 CPUs per node); with one pass it finished at once.
