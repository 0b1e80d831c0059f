"""One host's BMC session for the BIOS tasks: the options they share (``HostOptions``), the checked connection
(``connect``: https, the CA bundle, the password reference), the model's known shape claimed from the run's cache
(``claim_shape``), and ``bmc_session``: connect -> read as steps of the host's result, always logged out, the
request counts and warnings recorded. ``fail`` marks a host failed and says what was already done to it."""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..errors import NumaforgeError
from ..inventory.preflight import CA_BUNDLE_FIX, ca_bundle_problem
from ..program import prog
from ..report import HostResult
from .discovery import RegistryCache, Shape, shape_key
from .exchange import RetryPolicy
from .hoststate import BiosState, read_state
from .power import PostClock, Timeouts
from .redfish import RedfishClient
from .unsure import unsure_text
from .vendormap import VendorMap, load_vendor_map


@dataclass
class HostOptions:
    profile: str | None = None  # overrides host.bios_profile
    insecure: bool = False
    reboot: bool = False
    timeouts: Timeouts = field(default_factory=Timeouts)
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    profiles_dir: str | None = None
    vendors_dir: str | None = None
    journal: Any = None  # numaforge.journal.Journal of a --reboot run (resume after a crash)
    discovery_cache: bool = True  # keep registries and per-model paths on disk (numaforge.bios.discovery)
    unverified: str | None = None  # --unverified refuse|warn|allow (None: inventory var, profile key, default)
    post_clock: PostClock | None = None  # the reboot waits' PostClock, one per run (run_hosts); None: fixed polls

    @property
    def profiles_path(self) -> Path | None:
        return Path(self.profiles_dir) if self.profiles_dir else None

    def vendor_map(self, vendor: str) -> VendorMap:
        """The vendor's map (bios/vendors/<vendor>.yaml, or --vendors-dir's): its entries and reset waits."""
        return load_vendor_map(vendor, Path(self.vendors_dir) if self.vendors_dir else None)


def connect(host, opts: HostOptions) -> RedfishClient:
    """The client of the host's BMC (not logged in yet: use it as a context manager), after the checks that need
    no request: a bmc section and password, an existing CA bundle, https unless --insecure."""
    bmc = host.bmc
    where = f"{host.name} ({host.location})"
    if bmc is None:
        raise NumaforgeError("host has no bmc section", where, "add bmc: {url: https://..., password: env:VAR}")
    if bmc.password is None:
        raise NumaforgeError("bmc.password is not set", where, "set bmc.password: env:VARIABLE or file:/path")
    insecure = opts.insecure or bmc.insecure
    if bmc.ca_bundle and not insecure and not os.path.lexists(os.path.expanduser(bmc.ca_bundle)):
        raise NumaforgeError(
            f"bmc.ca_bundle {bmc.ca_bundle} does not exist",
            where,
            "point bmc.ca_bundle at the PEM file of the CA that signed the BMC certificate",
        )
    ca_problem = ca_bundle_problem(bmc.ca_bundle) if bmc.ca_bundle and not insecure else None
    if ca_problem:  # it is set: "set bmc.ca_bundle" (the TLS error's fix) would send the operator in circles
        raise NumaforgeError(ca_problem, host.sources.get("bmc.ca_bundle", where), CA_BUNDLE_FIX)
    if not bmc.url.startswith("https://") and not insecure:
        raise NumaforgeError(
            f"bmc.url {bmc.url} is not https", where, "use https://; plain http only with --insecure on a lab network"
        )
    return RedfishClient(
        bmc.url,
        bmc.username,
        bmc.password.resolve(),
        host=host.name,
        ca_file=os.path.expanduser(bmc.ca_bundle) if bmc.ca_bundle else None,
        insecure=insecure,
        policy=opts.policy,
        auth=bmc.auth,
    )


def claim_shape(client: RedfishClient, host, opts: HostOptions, cache: RegistryCache) -> Shape | None:
    """The host's model's known shape (its sessions URL is then used for the login), or None: this host
    discovers, and hosts of its model wait for it until the session closes (RegistryCache.claim)."""
    key = shape_key(host)
    shape = cache.claim(key, wait=opts.policy.connect_timeout + opts.policy.read_timeout)
    if shape is not None:
        client.known_login_url = shape.login_url
    elif key:
        client.on_close.append(lambda: cache.release(key))
    return shape


def record_session(result: HostResult, client: RedfishClient | None) -> None:
    """The session's request counts, authentication and warnings into the host's result data."""
    if client is not None:
        result.data["requests"] = client.count()
        result.data["patches"] = client.count("PATCH")
        result.data["auth"] = client.auth_method
        if client.warnings:
            result.data["warnings"] = list(client.warnings)


def fail(result: HostResult, exc: BaseException) -> None:
    """Mark the host failed; the message also says what this run had already done to it."""
    result.status = "failed"
    result.message = exc.render() if isinstance(exc, NumaforgeError) else f"{type(exc).__name__}: {exc}"
    done = []
    if result.data.get("changed"):
        done.append(f"written before it stopped: {', '.join(result.data['changed'])} (pending until a reset)")
    write = result.data.get("write") or {}
    if write.get("outcome") == "unknown":
        done.append(
            "outcome unknown of the PATCH that was on the wire; "
            + (
                f"re-read: {write['shows']}"
                if write.get("reread") == "ok"
                else f"the re-read {write.get('reread', 'failed')}, so these may or may not be written: "
                + ", ".join(write["sent"])
                + f" (`{prog()} bios-plan` shows what the BMC holds)"
            )
        )
    done += [unsure_text(record) for record in result.data.get("unsure") or []]
    if result.data.get("reset_requested"):
        done.append(f"a reset was requested at {result.data['reset_requested']}")
    elif result.data.get("reset_outcome_unknown"):
        done.append(
            f"a reset request sent at {result.data['reset_outcome_unknown']} got no answer: whether the BMC "
            "took it is unknown (a re-run waits for it rather than reset again)"
        )
    if done:
        result.message += "\n  " + "; ".join(done)


@contextmanager
def bmc_session(
    host, opts: HostOptions, cache: RegistryCache, result: HostResult
) -> Iterator[tuple[RedfishClient, BiosState]]:
    """connect -> read for one host, as steps of ``result``; yields (client, state). On the way out the session
    is logged out and the request counts and warnings go into ``result.data`` (also when the body failed)."""
    client = None
    try:
        with result.step("connect"):
            client = connect(host, opts)
            shape = claim_shape(client, host, opts, cache)
        with client:
            with result.step("read"):
                state = read_state(client, host, cache, shape)
            yield client, state
    finally:
        record_session(result, client)
