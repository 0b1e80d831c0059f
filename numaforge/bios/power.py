"""Resetting a host to apply BIOS values, and knowing where it is in its boot (issue 26 item 3).

A warm restart keeps PowerState "On": power alone cannot tell a host whose OS ignored the graceful restart from
one that is running POST (on a GPU server, many minutes). A ForceRestart in POST can corrupt the BIOS update
being applied, so it is sent only on positive evidence that the OS is up and never went down since the graceful
request: BootProgress.LastState OSRunning (or HPE's Oem.Hpe.PostState FinishedPost) with an unchanged
LastStateTime and no change of the Bios's @Redfish.Settings Time/Messages (which move when POST applies settings),
and no running config job. A host still booting when the wait is over gets a verdict ("still booting after N s"),
never a second reset. A reset request answered with an error (or not at all) is followed by re-reading the
power and boot state: if the BMC acted, the wait goes on; if not, the report says so without suggesting another
reset. The waits come from the vendor map (``reboot:``, data per vendor) unless the command line gives them.

``BootView``, ``phase``, ``restarted`` and ``force_verdict`` are pure; ``reboot`` and ``wait_back`` talk to the BMC.
"""

from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable

from .. import budget
from ..program import prog
from ..waits import Steps, run_steps
from .errors import RedfishError, RedfishHTTPError, RedfishRedirectError
from .exchange import path_of
from .redfish import RedfishClient
from .unsure import watch_write

# DSP8010 (ComputerSystem BootProgressTypes): every BootProgress.LastState value the standard defines
BOOT_PROGRESS = (
    "None",
    "PrimaryProcessorInitializationStarted",
    "BusInitializationStarted",
    "MemoryInitializationStarted",
    "SecondaryProcessorInitializationStarted",
    "PCIResourceConfigStarted",
    "SystemHardwareInitializationComplete",
    "SetupEntered",
    "OSBootStarted",
    "OSRunning",
    "OEM",
)
# ... those of a host between reset and OS (OEM: see OemLastState). SystemHardwareInitializationComplete is not
# among them: DSP8010 defines it as the end of hardware initialization, that is of POST, and a BMC that sees
# nothing after POST keeps it while the OS runs (the Supermicro X13 capture, NVIDIA/libredfish tests/mockups/
# supermicro: PowerState On, no LastStateTime). So it tells neither POST nor OS -- phase "unknown" -- but it is
# positive evidence that POST is over (POST_DONE): a forced reset there cannot cut a BIOS update, so a hung OS
# can be forced (issue 41 item 6). Any value outside DSP8010 is "cannot tell" and never forced
# ("SystemHardwareInitializationStarted", which DSP8010 does not define, was here).
BOOTING = {
    "PrimaryProcessorInitializationStarted",
    "BusInitializationStarted",
    "MemoryInitializationStarted",
    "SecondaryProcessorInitializationStarted",
    "PCIResourceConfigStarted",
    "SetupEntered",
    "OSBootStarted",
    "OEM",
}
POST_DONE = {"SystemHardwareInitializationComplete"}  # POST over; whether the OS runs the BMC cannot see
HPE_BOOTING = {"Reset", "InPost", "InPostDiscoveryComplete"}  # Oem.Hpe.PostState while the host boots
# ... those that say the host is in POST for certain: a look that finds one cannot end the wait, so it reads the
# System alone (OSBootStarted and OEM may be what a BMC keeps showing once the OS runs: such a look reads the Bios
# too, whose values then tell that POST is over)
IN_POST = BOOTING - {"OSBootStarted", "OEM"}
JOB_BOOTING = {"Running", "Starting", "Downloading"}  # a Dell config job being applied: the host is in POST


@dataclass
class Timeouts:
    """Waits around a reset, seconds. ``graceful``/``power_on`` None: the vendor map's ``reboot:`` values."""

    graceful: float | None = None  # after GracefulRestart, before a hung OS (and only that) may be forced
    power_on: float | None = None  # for the host to come back with the OS running after a reset
    job: float = 120.0  # wait for a config job to reach Scheduled / Completed
    poll: float = 5.0  # seconds between polls
    settle: float = 120.0  # after power-on, wait this long for the BMC to report the new values


DEFAULT_WAITS = {"graceful": 300.0, "power_on": 900.0}


def waits(t: Timeouts, vendor_waits: dict[str, float] | None) -> tuple[float, float]:
    """(graceful, power_on): the command line's, else the vendor map's, else the defaults. Pure."""
    vw = {**DEFAULT_WAITS, **(vendor_waits or {})}
    return (
        t.graceful if t.graceful is not None else vw["graceful"],
        t.power_on if t.power_on is not None else vw["power_on"],
    )


@dataclass(frozen=True)
class BootView:
    """What the BMC says about the host's boot at one moment."""

    power: str = "Unknown"
    last_state: str = ""  # BootProgress.LastState
    oem_last_state: str = ""  # BootProgress.OemLastState
    stamp: str = ""  # BootProgress.LastStateTime
    post_state: str = ""  # HPE Oem.Hpe.PostState
    settings: str = ""  # the Bios's @Redfish.Settings Time + Messages (they change when POST applies values)
    job: str = ""  # the config job's state (Dell), "" without one

    def text(self) -> str:
        parts = [f"PowerState {self.power}"]
        if self.last_state:
            oem = f" ({self.oem_last_state})" if self.oem_last_state else ""
            parts.append(f"BootProgress {self.last_state}{oem}" + (f" since {self.stamp}" if self.stamp else ""))
        if self.post_state:
            parts.append(f"PostState {self.post_state}")
        if self.job:
            parts.append(f"config job {self.job}")
        return ", ".join(parts)


def boot_view(system: dict, bios: dict | None = None, job: str = "") -> BootView:
    """A BootView from a ComputerSystem document (and the Bios, for its settings time stamps). Pure."""
    progress, oem = system.get("BootProgress"), system.get("Oem")
    bp: dict = progress if isinstance(progress, dict) else {}
    hpe = (oem.get("Hpe") or {}) if isinstance(oem, dict) else {}
    st = (bios or {}).get("@Redfish.Settings") or {}
    return BootView(
        power=str(system.get("PowerState") or "Unknown"),
        last_state=str(bp.get("LastState") or ""),
        oem_last_state=str(bp.get("OemLastState") or ""),
        stamp=str(bp.get("LastStateTime") or ""),
        post_state=str(hpe.get("PostState") or "") if isinstance(hpe, dict) else "",
        settings=f"{st.get('Time')}|{st.get('Messages')}" if st else "",
        job=job,
    )


def phase(v: BootView) -> str:
    """The phase: "off", "booting" (POST, setup, OS loading, a config job running), "os" (the OS is up) or "unknown"
    (the BMC says nothing that tells). Pure."""
    if v.power in ("Off", "PoweringOff", "Paused"):
        return "off"
    if v.power == "PoweringOn" or v.job in JOB_BOOTING:
        return "booting"
    if v.last_state in BOOTING or v.post_state in HPE_BOOTING:
        return "booting"
    if v.last_state == "OSRunning" or (not v.last_state and v.post_state == "FinishedPost"):
        return "os" if v.power == "On" else "unknown"
    return "unknown"


def restarted(before: BootView, now: BootView) -> bool:
    """Evidence that the host went through a reset since ``before``: off or booting now, a new boot progress
    time stamp, or the Bios's settings time stamps/messages moved (POST applied values). Pure."""
    if phase(now) in ("off", "booting"):
        return True
    return bool((now.stamp and now.stamp != before.stamp) or (now.settings and now.settings != before.settings))


def force_verdict(before: BootView, now: BootView, seen_restart: bool, errored: bool) -> str:
    """Why a ForceRestart must NOT be sent now ("" = it may: the OS is up and never went down since the graceful
    request, which it ignored). Pure."""
    if errored:
        return "the reset request was answered with an error; a reset is never sent again after one"
    if seen_restart or restarted(before, now):
        return "the host restarted since the request (it is booting or came back)"
    ph = phase(now)
    if ph == "booting":
        return f"the host is booting ({now.text()})"
    if ph != "os" and not past_post(now):
        return f"the BMC does not say the OS is running ({now.text()}): the host may be in POST"
    return ""


def past_post(v: BootView) -> bool:
    """Positive evidence that POST is over although the BMC cannot see the OS (POST_DONE, powered on): a forced
    reset cannot cut a BIOS update then. Pure."""
    return v.power == "On" and v.last_state in POST_DONE


def surely_down(v: BootView) -> bool:
    """The System alone says the host is off, powering on or in POST (IN_POST): it is not back. Pure."""
    return (
        v.power in ("Off", "PoweringOff", "PoweringOn", "Paused")
        or v.last_state in IN_POST
        or (v.post_state in HPE_BOOTING)
    )


class _Host:
    """Reads of one host's System and Bios for the reset loop."""

    def __init__(self, client: RedfishClient, paths: tuple[str, str], job: Callable[[], str] | None, names=None):
        self.client, (self.system_path, self.bios_path), self.job = client, paths, job
        self.names = names or dict  # current values -> the registry's ValueName space (Registry.value_names)

    def view(self) -> tuple[BootView, dict]:
        system = self.client.get(self.system_path).body
        bios = self.client.get(self.bios_path).body
        return boot_view(system, bios, self.job() if self.job else ""), self.names(bios.get("Attributes") or {})

    def look(self) -> tuple[BootView, dict | None]:
        """One look during the wait: the System, and the Bios (and job) only when the System does not say the
        host is still down (surely_down; then no values: None). One request per look for most of POST instead
        of two or three (issue 43 item 5: 250 hosts polling share the build server's cores with their work)."""
        system = self.client.get(self.system_path).body
        quick = boot_view(system)
        if surely_down(quick):
            return quick, None
        bios = self.client.get(self.bios_path).body
        return boot_view(system, bios, self.job() if self.job else ""), self.names(bios.get("Attributes") or {})


class PostClock:
    """How long the hosts of one run take to come back after a reset, learnt per model as they come back
    (issue 43 item 5): for each, the elapsed seconds of its last look that found it still down (its POST ended
    later) and of the look that found it back. A host of a model seen looks every ``poll`` seconds until the
    earliest end seen, then every ``FAST`` seconds until the latest end seen plus one poll, then every
    ``poll`` again: a wave of hosts ends about when their POST ends, not up to a poll later, for a few more
    one-request looks per host. Thread-safe; one per run (run_hosts)."""

    FAST = 1.0  # seconds between looks near the expected end (never more often than the poll itself)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[float, float]] = {}  # model -> (earliest end, latest end) seen

    def learn(self, model: str, down_at: float, back_at: float) -> None:
        with self._lock:
            lo, hi = self._seen.get(model, (down_at, back_at))
            self._seen[model] = (min(lo, down_at), max(hi, back_at))

    def next_look(self, model: str, elapsed: float, poll: float) -> float:
        """Seconds until the next look at a host of ``model`` ``elapsed`` seconds after its reset."""
        with self._lock:
            seen = self._seen.get(model)
        if seen is None:
            return poll
        lo, hi = seen
        fast = min(poll, self.FAST)
        if elapsed + poll <= lo or elapsed > hi + poll:
            return poll
        return max(fast, lo - elapsed) if elapsed < lo else fast


def _applied(attrs: dict, want: dict[str, Any]) -> bool:
    return all(attrs.get(k) == v for k, v in want.items())


def reset_action(system: dict, system_path: str) -> tuple[str, list[str]]:
    action = (system.get("Actions") or {}).get("#ComputerSystem.Reset") or {}
    target = action.get("target")
    if not target:
        raise RedfishError(
            "the system has no ComputerSystem.Reset action",
            system_path,
            "reboot the host another way; the values stay pending until it resets",
        )
    return path_of(target), list(action.get("ResetType@Redfish.AllowableValues") or [])


def _send(
    client: RedfishClient,
    target: str,
    kind: str,
    result_data: dict | None,
    on_reset: Callable[[str], None] | None = None,
    watch: tuple[BootView, Callable[[], BootView]] | None = None,
) -> str:
    """POST one reset request, noted in ``result_data["resets"]`` before it is sent. "" when accepted, else
    what went wrong (the caller re-reads the host's state: the BMC may have acted anyway). ``on_reset`` hears
    "sending" before the request leaves, then "accepted" (2xx, no redirect: ``result_data["reset_requested"]``
    is set only then), "refused" (a redirect or a 4xx: not carried out) -- or nothing more when the outcome is
    unknown (no answer, 5xx: ``result_data["reset_outcome_unknown"]``). Issue 40 item 3: a refused reset was
    recorded as requested and a re-run waited for a reset that never happened. A request cut on the wire (a stop,
    the host's budget) ends the host: with ``watch`` (the boot view before, a read of it now), the re-read then says
    in ``result_data["unsure"]`` whether the BMC took it (numaforge.bios.unsure)."""
    budget.check(f"the {kind} reset request")  # an interrupted run stops here, before anything is noted
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    entry: dict[str, Any] = {"type": kind, "requested": stamp}
    if result_data is not None:
        result_data.setdefault("resets", []).append(entry)

    def heard(outcome: str) -> None:
        entry["outcome"] = outcome
        if result_data is not None and outcome == "accepted":
            result_data.setdefault("reset_requested", stamp)
            result_data.pop("reset_outcome_unknown", None)
        elif result_data is not None and outcome == "unknown" and "reset_requested" not in result_data:
            result_data["reset_outcome_unknown"] = stamp
        if on_reset is not None and outcome != "unknown":
            on_reset(outcome)

    if on_reset is not None:
        on_reset("sending")
    cut = (
        watch_write(
            client,
            result_data,
            f"POST {target} (ResetType {kind})",
            lambda: {"shows": reset_shows(kind, watch[0], watch[1]())},
            f"`{prog()} bmc-power --host {client.host} status`",
        )
        if watch is not None and result_data is not None
        else nullcontext()
    )
    with cut:  # only a request cut on the wire leaves it: an error answered here is the caller's to re-read
        try:
            r = client.post(target, {"ResetType": kind})
        except RedfishRedirectError as exc:  # answered, not carried out (a redirect is never followed)
            heard("refused")
            return f"ComputerSystem.Reset {kind}: {exc.what}"
        except RedfishHTTPError as exc:
            heard("refused" if exc.status < 500 else "unknown")
            return f"ComputerSystem.Reset {kind} answered {exc.status}: {exc.what}"
        except RedfishError as exc:
            heard("unknown")
            return f"ComputerSystem.Reset {kind} got no answer ({exc.what})"
        except BaseException:  # cut on the wire (a stop, the budget): the BMC may have taken it
            heard("unknown")
            raise
        if r.status >= 400:
            heard("refused" if r.status < 500 else "unknown")
            return f"ComputerSystem.Reset {kind} answered {r.status}: {r.error_text()}"
        heard("accepted")
        return ""


def reset_shows(kind: str, before: BootView, now: BootView) -> str:
    """What a re-read after a reset request of unknown outcome shows, in words. Pure."""
    took = now.power in ("On", "PoweringOn") if kind == "On" else restarted(before, now)
    if kind in ("GracefulShutdown", "ForceOff"):
        took = phase(now) == "off"
    if took:
        return f"{now.text()}: the BMC took the {kind}"
    return f"{now.text()}: no sign of the {kind} yet (the BMC may still act on it; it was not sent again)"


def reboot(*args: Any, **kwargs: Any) -> dict:
    """``reboot_steps`` run here, sleeping between looks (numaforge.waits.run_steps)."""
    return run_steps(reboot_steps(*args, **kwargs))


def reboot_steps(
    client: RedfishClient,
    system: dict,
    paths: tuple[str, str],
    want: dict[str, Any],
    t: Timeouts,
    vendor_waits: dict[str, float] | None = None,
    result_data: dict | None = None,
    job: Callable[[], str] | None = None,
    names: Callable[[dict], dict] | None = None,
    on_reset: Callable[[str], None] | None = None,
    clock: PostClock | None = None,
) -> Steps[dict]:
    """Graceful restart; ForceRestart only for an OS that ignored it (force_verdict); wait until the OS runs
    again and the new values are current. ``paths``: (System, Bios). Raises with a verdict, never resets twice
    for a host that is booting. ``on_reset``: told of each reset request (``_send``), for the journal. A generator
    of waits (numaforge.waits): it yields the seconds until its next look at the host, so the fleet runner can
    give the host's worker back while the host runs POST (issue 43 item 5). ``clock``: the run's PostClock (the
    looks quicken near the end its other hosts of this model took; None: every ``t.poll``)."""
    system_path, bios_path = paths
    target, allowed, listed_by = reset_types(client, system, system_path)
    graceful, power_on = waits(t, vendor_waits)
    host = _Host(client, paths, job, names)

    def look() -> BootView:
        return host.view()[0]

    before, _ = host.view()
    first, chose = first_reset(phase(before), allowed, listed_by)
    if chose:
        client.warnings.append(chose)
    if in_post(before) or (first in FORCED and phase(before) == "booting"):
        # no reset of any kind in POST, not even a graceful one: the BIOS may be applying settings (issue 41 item 8)
        raise RedfishError(
            f"the host is booting ({before.text()}): a {first} in POST can corrupt a BIOS update, so it was not "
            "sent"
            + (f" (the BMC offers no GracefulRestart: {listed_by}: {', '.join(allowed)})" if first in FORCED else ""),
            f"{client.host} ({client.base_url})",
            "wait until the host runs its OS, then run again; the BIOS values stay pending until it resets",
        )
    log: dict[str, Any] = {"resets": [], "waits": {"graceful": graceful, "power_on": power_on}}
    if chose:
        log["reset_choice"] = chose
    if first == "GracefulShutdown":
        first = _shut_down(client, host, target, graceful, t.poll, log, result_data, on_reset, before)
    error = _send(client, target, first, result_data, on_reset, (before, look))
    log["resets"].append({"type": first, "error": error} if error else {"type": first})
    start = time.monotonic()
    seen_restart, forced, held = False, first != "GracefulRestart", []
    model, down_at, delay = str(system.get("Model") or ""), 0.0, t.poll
    while True:
        yield delay
        now, attrs = host.look()
        seen_restart = seen_restart or restarted(before, now)
        applied = attrs is not None and _applied(attrs, want)  # the BMC shows the new values once POST applied them
        up = phase(now) in ("os", "unknown") and (seen_restart or applied)
        if up and not applied and not _post_shown(now) and not (now.settings and now.settings != before.settings):
            # Off, then On, and nothing tells POST from the OS (no BootProgress, PostState or job: the R750 and
            # SR670 V2 captures): only the values becoming current, or the Settings Time/Messages moving, says
            # POST is over -- wait for that within the power-on budget, never judge early (issue 41 item 8)
            up = False
        elapsed = time.monotonic() - start
        if now.power == "On" and (up or (seen_restart and applied)):  # OSBootStarted may be the last state
            if clock is not None and "forced_after_s" not in log and not error:  # a wait like the next host's
                clock.learn(model, down_at, elapsed)
            break
        down_at = elapsed
        delay = clock.next_look(model, elapsed, t.poll) if clock is not None else t.poll
        if error and elapsed > graceful and not seen_restart:
            raise RedfishError(
                f"{error}; re-read for {elapsed:.0f} s: the host did not restart ({now.text()})",
                f"{client.host} ({client.base_url})",
                "check the BMC's log and the host console; the BIOS values stay pending until the host resets",
            )
        if not forced and elapsed > graceful:
            why = force_verdict(before, now, seen_restart, bool(error))
            if not why and allowed and "ForceRestart" not in allowed:
                why = "the BMC does not offer ForceRestart"
            if why:
                held += [] if why in held else [why]
            else:
                error = _send(client, target, "ForceRestart", result_data, on_reset, (now, look))
                log["resets"].append({"type": "ForceRestart", "error": error} if error else {"type": "ForceRestart"})
                log["forced_after_s"] = round(elapsed, 1)
                before, forced = now, True
        if elapsed > power_on + (graceful if forced or held else 0):
            raise _still_booting(client, now, elapsed, seen_restart, "forced_after_s" in log)
    if held:
        log["not_forced"] = held
    if error:
        client.warnings.append(f"{error}; re-read: the host restarted, so the BMC acted on it")
    settle_until = time.monotonic() + t.settle  # the BMC reports the new values once POST has finished
    while not applied and time.monotonic() < settle_until:  # the look that found it back read them already
        yield t.poll
        applied = _applied(host.view()[1], want)
    log["seconds"] = round(time.monotonic() - start, 1)
    return log


def _post_shown(v: BootView) -> bool:
    """The BMC reports where the boot is (BootProgress, HPE PostState or a config job). Pure."""
    return bool(v.last_state or v.post_state or v.job)


def _shut_down(client, host, target, graceful, poll, log, result_data, on_reset, before) -> str:
    """A BMC without GracefulRestart (first_reset): GracefulShutdown, wait up to ``graceful`` s for the host to
    be off; "On" is then the reset to send. An OS that ignores it is never forced: a RedfishError says so."""
    error = _send(client, target, "GracefulShutdown", result_data, on_reset, (before, lambda: host.view()[0]))
    log["resets"].append({"type": "GracefulShutdown", "error": error} if error else {"type": "GracefulShutdown"})
    start = time.monotonic()
    while True:
        now, _ = host.view()
        if phase(now) == "off" and now.power == "Off":
            return "On"
        if time.monotonic() - start > graceful:
            raise RedfishError(
                (f"{error}; " if error else "")
                + f"the host did not power off within {graceful:.0f} s of GracefulShutdown ({now.text()}); "
                "it was not forced (the BMC offers no GracefulRestart, and a hung OS is forced only by hand)",
                f"{client.host} ({client.base_url})",
                "shut the OS down from the host, or force it with bmc-power once you know it is not in POST; "
                "the BIOS values stay pending until the host resets",
            )
        time.sleep(poll)


def _still_booting(
    client: RedfishClient, now: BootView, elapsed: float, seen_restart: bool, forced: bool = False
) -> RedfishError:
    ph = phase(now)
    os_up = now.power == "On" and (
        now.last_state == "OSRunning" or (not now.last_state and now.post_state == "FinishedPost")
    )
    if seen_restart and os_up and now.job in JOB_BOOTING:  # the host is back; only the job says otherwise
        return RedfishError(
            f"the host restarted and its OS runs again ({now.text()}), but the BIOS config job is still "
            f"{now.job} after {elapsed:.0f} s: the job is stuck, not the host (its values are not applied); "
            "the host was not reset again",
            f"{client.host} ({client.base_url})",
            f"see the job and its message on the iDRAC (`{prog()} bios-jobs --host {client.host}`); a job stuck "
            "Running is cleared on the iDRAC itself (its job queue), then the values can be applied anew",
        )
    if ph in ("booting", "off") or seen_restart:
        what = f"still booting after {elapsed:.0f} s ({now.text()}); it was not reset again"
    elif forced:  # a ForceRestart was sent and accepted, yet nothing shows it ran (issue 41 item 8)
        what = (
            f"the host did not restart within {elapsed:.0f} s ({now.text()}), not even after the ForceRestart "
            "the BMC accepted: the BMC did not carry it out; it was not reset again"
        )
    else:
        what = (
            f"the host did not restart within {elapsed:.0f} s ({now.text()}) and the BMC does not show that "
            "its OS is running, so it was not forced (it may be in POST)"
        )
    return RedfishError(
        what,
        f"{client.host} ({client.base_url})",
        f"watch the host console until POST ends, then `{prog()} bios-verify`; do not reset a host in POST "
        "(a longer wait: --power-timeout, or reboot.power_on in the vendor map)",
    )


def wait_back(*args: Any, **kwargs: Any) -> dict:
    """``wait_back_steps`` run here, sleeping between looks (numaforge.waits.run_steps)."""
    return run_steps(wait_back_steps(*args, **kwargs))


def wait_back_steps(
    client: RedfishClient, paths: tuple[str, str], want: dict[str, Any], t: Timeouts, vendor_waits=None, names=None
) -> Steps[dict]:
    """Resume after a crash mid-reboot: no reset request, only wait until the OS runs with the new values
    current (or the power-on wait passes; verification then reports what is still pending)."""
    _, power_on = waits(t, vendor_waits)
    host = _Host(client, paths, None, names)
    start = time.monotonic()
    while True:
        now, attrs = host.view()
        if now.power == "On" and _applied(attrs, want):  # the BMC shows the new values once POST applied them
            break
        if time.monotonic() - start >= power_on:
            break
        yield t.poll
    return {"seconds": round(time.monotonic() - start, 1), "power": now.power, "boot": now.text()}


# -- bmc-power: one reset request the operator asks for, with bios-apply's POST safety -------------------------
# the operator's word -> the ResetTypes that carry it out, first offered wins (DSP8010 ResetType)
POWER_ACTIONS: dict[str, tuple[str, ...]] = {
    "status": (),
    "on": ("On",),
    "off": ("GracefulShutdown", "ForceOff"),
    "graceful-restart": ("GracefulRestart",),
    "force-restart": ("ForceRestart",),
}
FORCED = {"ForceOff", "ForceRestart", "PowerCycle"}


@dataclass(frozen=True)
class PowerDecision:
    """What bmc-power does on one host: ``reset`` ("" = nothing to send), ``status`` (unchanged when the host is
    already where the operator wants it, failed when refused) and why / how to go on."""

    reset: str
    status: str
    why: str
    fix: str = ""


# The reset --reboot sends first, in order, among the types the BMC allows (a host that is off: On). The AMI
# MegaRAC of the DGX H100 capture (NVIDIA/libredfish tests/mockups/nvidia_viking) lists ForceOff, ForceRestart,
# GracefulShutdown and On in its ActionInfo: GracefulRestart is refused there with a 400 (issue 41 item 5).
# GracefulShutdown stands for two requests: GracefulShutdown, then On once the host is off (both must be offered).
RESTART_ORDER = ("GracefulRestart", "GracefulShutdown", "ForceRestart", "PowerCycle")


def first_reset(ph: str, allowed: list[str], listed_by: str = "") -> tuple[str, str]:
    """(the first reset to send, what to say about the choice: "" for the usual one). ``allowed`` [] means the
    BMC does not say: the usual type is sent and the BMC refuses what it lacks. Pure."""
    usual = "On" if ph == "off" else RESTART_ORDER[0]
    if not allowed or usual in allowed:
        return usual, ""
    order = ("On",) if usual == "On" else RESTART_ORDER
    fits = [k for k in order if k in allowed and (k != "GracefulShutdown" or "On" in allowed)]
    pick = fits[0] if fits else usual
    said = f"the BMC does not offer {usual} ({listed_by or 'allowed'}: {', '.join(allowed)})"
    if pick == usual:
        return usual, f"{said}: sent {usual} anyway (no other type fits, in the order {', '.join(order)})"
    then = ", then On once the host is off" if pick == "GracefulShutdown" else ""
    return pick, f"{said}: sent {pick}{then}, the first it offers in the order {', '.join(order)}"


def reset_types(client: RedfishClient, system: dict, system_path: str) -> tuple[str, list[str], str]:
    """(target, the ResetTypes the BMC allows, where that list came from): the action's
    ``ResetType@Redfish.AllowableValues``, else its ``@Redfish.ActionInfo`` document's ResetType parameter
    (DSP0266 ActionInfo), else [] ("not stated": every type may be tried, the BMC refuses what it lacks)."""
    target, allowed = reset_action(system, system_path)
    if allowed:
        return target, allowed, "ResetType@Redfish.AllowableValues"
    action = (system.get("Actions") or {}).get("#ComputerSystem.Reset") or {}
    info = action.get("@Redfish.ActionInfo")
    if isinstance(info, str) and info:
        listed = action_info_reset_types(client.get(path_of(info)).body)
        if listed:
            return target, listed, f"ActionInfo {path_of(info)}"
    return target, [], "not stated by the BMC"


def action_info_reset_types(doc: Any) -> list[str]:
    """The ResetType parameter's AllowableValues in an ActionInfo document ([] when it lists none). Pure."""
    for p in (doc.get("Parameters") or []) if isinstance(doc, dict) else []:
        if isinstance(p, dict) and p.get("Name") == "ResetType" and isinstance(p.get("AllowableValues"), list):
            return [str(v) for v in p["AllowableValues"]]
    return []


def power_decision(action: str, now: BootView, allowed: list[str], host: str = "H") -> PowerDecision:
    """bmc-power ``action`` for a host whose boot the BMC shows as ``now``. Pure. The POST safety is
    bios-apply's (``phase``, ``force_verdict``): nothing but "On" is sent to a host that is booting (POST, a
    config job running: a reset then can corrupt the BIOS settings being applied), and a forced reset only
    with positive evidence that the OS runs or that POST is over (``past_post``). No refusal's fix names the refused request again."""
    if action not in POWER_ACTIONS:
        raise ValueError(action)
    ph = phase(now)
    status = f"`{prog()} bmc-power --host {host} status`"
    if action == "status":
        return PowerDecision("", "unchanged", now.text())
    if action == "on":
        if now.power in ("On", "PoweringOn"):
            return PowerDecision("", "unchanged", f"already on ({now.text()})")
        return _offered(("On",), allowed, now)
    if ph == "off":
        if action == "off":
            return PowerDecision("", "unchanged", f"already off ({now.text()})")
        return PowerDecision(
            "",
            "failed",
            f"the host is off ({now.text()}): there is nothing to restart",
            f"power it on: `{prog()} bmc-power --host {host} on`",
        )
    if in_post(now):
        return PowerDecision(
            "",
            "failed",
            f"the host is in POST ({now.text()}): a reset now can corrupt the BIOS settings being applied; "
            "nothing was sent",
            f"wait until POST ends (watch the host console, or {status} until BootProgress says OSRunning)",
        )
    want = POWER_ACTIONS[action]
    decided = _offered(want, allowed, now)
    if decided.reset in FORCED and ph != "os" and not past_post(now):
        return PowerDecision(
            "",
            "failed",
            f"the BMC does not say the OS is running ({now.text()}): the host may be in POST, so no forced "
            f"{decided.reset} was sent",
            f"watch the host console; once {status} shows the OS running (BootProgress OSRunning or "
            "PostState FinishedPost), a forced reset is safe",
        )
    return decided


def in_post(v: BootView) -> bool:
    """Positive evidence that POST runs (powering on, a config job running, BootProgress before OSBootStarted,
    HPE PostState InPost...): no reset of any kind then. OSBootStarted alone (an iDRAC without its OS agent
    stays there) is not POST: a graceful request goes to the OS, a forced one still needs OSRunning. Pure."""
    if v.power == "PoweringOn" or v.job in JOB_BOOTING or v.post_state in HPE_BOOTING:
        return True
    return v.power == "On" and v.last_state in BOOTING and v.last_state != "OSBootStarted"


def _offered(want: tuple[str, ...], allowed: list[str], now: BootView) -> PowerDecision:
    for kind in want:
        if not allowed or kind in allowed:
            return PowerDecision(kind, "changed", f"{kind} requested ({now.text()} before)")
    return PowerDecision(
        "",
        "failed",
        f"the BMC does not offer {' or '.join(want)} (it offers: {', '.join(allowed)}); nothing was sent",
        "use the BMC's own interface for this request",
    )


def send_reset(
    client: RedfishClient,
    target: str,
    kind: str,
    result_data: dict | None,
    watch: tuple[BootView, Callable[[], BootView]] | None = None,
) -> str:
    """One reset request (noted in ``result_data["resets"]`` before it is sent): "" when the BMC accepted it,
    else what went wrong. ``watch``: the boot view before and a read of it now, for a request cut on the wire."""
    return _send(client, target, kind, result_data, watch=watch)
