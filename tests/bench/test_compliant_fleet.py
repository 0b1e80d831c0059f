"""A compliant fleet costs the BMCs reads only: the real bios-apply path (numaforge.bios.apply.run_hosts, what
`invoke bios-apply` calls) against several simulated BMCs whose current values already equal the profile.

Not timed: speed lives in bench/bios_fleet.py. Request counts are counted by the simulators themselves.
Issue 8's target was <= 4 requests per compliant host. When the inventory states the vendor, hosts of one model
share what the first one discovered (sessions URL, system and Bios paths): 9 requests for the first host of a
model, 6 for the others. Issue 12 added two confirmation requests to every host served from a cache (the
cached system path must be the only one its BMC's Systems collection lists; the cached registry must be what
its BMC serves now, by a HEAD whose ETag must match): 4 -> 6 (login, Systems, Bios, settings object, HEAD of
the registry file, logout) -- a cache must never let through what discovery would refuse. With `vendor: auto`
every host reads the service root to detect its vendor and finds its system: 8 after the first (7 + the HEAD).
What the first host discovered is kept on disk (numaforge.bios.discovery), so a re-run costs every host of a
stated model 6, the first one included.
These tests pin the budgets (each test starts with an empty discovery cache: tests/conftest.py).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from numaforge.bios.apply import HostOptions, RegistryCache, plan_host, run_hosts
from numaforge.fleet import Rollout
from numaforge.inventory.model import BMCSpec, HardwareSpec, Host, Location
from numaforge.lab.bmc import BMCSimulator
from numaforge.report import HostResult
from numaforge.secrets import SecretRef

pytestmark = pytest.mark.bmc

PW_VAR = "NF_TEST_BENCH_BMC_PW"
PASSWORD = "bench-Fleet-pw-3"
# bmc.auth auto: HTTP Basic over verified TLS, so no session login or logout (issue 29)
FIRST_HOST_OF_A_REGISTRY = 7  # root, Systems, system, Bios, settings object, registry entry + file
OTHER_HOSTS = 6  # vendor auto: the registry comes from the run's cache (confirmed by a HEAD)
SAME_MODEL_HOSTS = 4  # vendor stated: Systems, Bios, settings object, HEAD registry -- all at once
SAME_MODEL_ROUND_TRIPS = 1  # issue 29: <= 2 sequential round trips and <= 4 requests per compliant host
SESSION_SAME_MODEL = (6, 3)  # bmc.auth session: login, the four reads at once, logout (requests, round trips)
# s per answer where round trips are counted. Requests sent together overlapped only if each reached the
# simulator before another was answered: on loaded CI workers (the bmc tier on 4 workers beside the kernel lane)
# one of a host's four parallel reads reached it more than 0.3 s, and once more than 1 s, after another was
# answered (2 round trips). The tests now gather() a host's parallel reads (held until all are in flight), so
# the count no longer depends on the machine's load; LATENCY only keeps sequential requests apart
LATENCY = 1.0

# the simulated flavours carry values no public source shows; these tests count requests, not that policy
APPLY = HostOptions(unverified="allow")


def make_host(name: str, sim: BMCSimulator, vendor: str = "auto", auth: str = "auto") -> Host:
    return Host(
        name=name,
        location=Location("<bench test>"),
        bmc=BMCSpec(
            url=sim.url,
            username="admin",
            password=SecretRef.parse(f"env:{PW_VAR}"),
            ca_bundle=str(sim.ca_file),
            vendor=vendor,
            auth=auth,
        ),
        hardware=HardwareSpec(platform="test", sockets=2, gpus=["0000:41:00.0"], nics=["0000:81:00.0"]),
        bios_profile="epyc-gpudirect",
    )


@pytest.fixture
def compliant_fleet(monkeypatch):
    """Simulators whose current BIOS values already equal the profile's (set as in BIOS setup; nothing pending)."""
    monkeypatch.setenv(PW_VAR, PASSWORD)
    started = []

    def make(flavours, vendor="auto", auth="auto", latency=0.0):
        fleet = []
        for i, flavour in enumerate(flavours):
            sim = BMCSimulator(flavour=flavour, tls=True, username="admin", password=PASSWORD, power_delay=0.2).start()
            started.append(sim)
            host = make_host(f"bmc{i:02d}-{flavour}", sim, vendor, auth)
            res = HostResult(host.name)
            plan = plan_host(host, HostOptions(), RegistryCache(), res)
            assert plan is not None, res.message
            sim.set_bios(**{i.attribute: i.desired for i in plan.items})
            assert sim.bios_pending() == {}
            sim.latency = latency  # from here on: the fixture's own plan above is not what a test counts
            sim.reset_counts()
            fleet.append((host, sim))
        return fleet

    yield make
    for sim in started:
        sim.stop()


def writes(sim: BMCSimulator) -> list[tuple[str, str]]:
    """Every request that could change something on the BMC, except the session login/logout."""
    return [
        (m, p)
        for m, p in sim.requests
        if m in ("PATCH", "PUT", "POST", "DELETE")
        and not p.rstrip("/").lower().endswith("sessions")
        and "/sessions/" not in p.lower()
    ]


def test_a_compliant_fleet_of_one_model_is_read_only_within_the_request_budget(compliant_fleet):
    fleet = compliant_fleet(["generic"] * 4)
    out = run_hosts([h for h, _ in fleet], "apply", APPLY, rollout=Rollout(forks=4))
    assert [r.status for r in out.results] == ["unchanged"] * 4, out.summary()
    assert out.registry_fetches == 1
    for (_host, sim), r in zip(fleet, out.results):
        assert sim.count("PATCH") == 0 and writes(sim) == [], sim.requests
        assert sim.count() == r.data["requests"]  # what the client counted is what the BMC served
        assert r.data["patches"] == 0 and r.data["changed"] == []
        assert sorted(r.data["verified"]) == sorted(i["attribute"] for i in r.data["plan"])
    assert sorted(sim.count() for _, sim in fleet) == [OTHER_HOSTS] * 3 + [FIRST_HOST_OF_A_REGISTRY]


@pytest.mark.parametrize("flavour", ["generic", "dell", "hpe"])
def test_hosts_of_one_stated_model_cost_four_reads_at_once_when_compliant(compliant_fleet, flavour):
    fleet = compliant_fleet([flavour] * 4, vendor=flavour)
    out = run_hosts([h for h, _ in fleet], "apply", APPLY, rollout=Rollout(forks=4))  # all four start at once
    assert [r.status for r in out.results] == ["unchanged"] * 4, out.summary()
    assert out.registry_fetches == 1
    for (_host, sim), r in zip(fleet, out.results):
        assert writes(sim) == [], sim.requests
        assert sim.count() == r.data["requests"]
        assert sorted(r.data["verified"]) == sorted(i["attribute"] for i in r.data["plan"])
    counts = sorted(sim.count() for _, sim in fleet)
    assert counts == [SAME_MODEL_HOSTS] * 3 + [FIRST_HOST_OF_A_REGISTRY], [s.requests for _, s in fleet]
    # the four reads of a later host, sent at once: its Systems (confirms the model's system path), its Bios,
    # its settings object, HEAD of the registry file (confirms the cached registry); no login, no logout
    later = next(s for _, s in fleet if s.count() == SAME_MODEL_HOSTS)
    assert sorted(m for m, _ in later.requests) == ["GET", "GET", "GET", "HEAD"], later.requests
    assert {p.lower().rstrip("/") for _, p in later.requests} == {
        x.lower().rstrip("/")
        for x in ("/redfish/v1/Systems", later.bios_path, later.settings_path, later.flavour.registry_uri)
    }, later.requests
    assert all(r.data["auth"] == "basic" for r in out.results)
    # kept-alive TLS connections: at most one per read sent at once (the discovering host sends two at most)
    assert all(1 <= sim.connections <= SAME_MODEL_HOSTS for _, sim in fleet), [s.connections for _, s in fleet]
    assert min(sim.connections for _, sim in fleet) <= 2


def test_a_stale_model_entry_falls_back_to_full_discovery(compliant_fleet):
    """A host of a known model whose system is not where the model's first host had it (another firmware):
    its Systems collection does not list the cached path, which sends it through full discovery instead of
    failing. The run cache is seeded with a wrong path."""
    from numaforge.bios.discovery import Shape, shape_key

    ((host, sim),) = compliant_fleet(["generic"], vendor="generic")
    cache = RegistryCache()
    cache.learn(
        shape_key(host),
        Shape(
            "/redfish/v1/SessionService/Sessions",
            "/redfish/v1/Systems/Gone",
            "/redfish/v1/Systems/Gone/Bios",
            "BiosAttributeRegistry.v1_0_0",
        ),
    )
    res = HostResult(host.name)
    plan = plan_host(host, HostOptions(), cache, res)
    assert plan is not None and res.status == "unchanged", res.message
    paths = [p for _, p in sim.requests]
    # the model's reads went out at once (its Systems collection, the cached Bios path); the collection does
    # not list the cached system, so the Bios answer is not used: the host found its real system instead
    assert set(paths[:2]) == {"/redfish/v1/Systems", "/redfish/v1/Systems/Gone/Bios"}, paths
    assert res.data["system"] == "/redfish/v1/Systems/1" and "/redfish/v1/Systems/1" in paths[2:], paths
    assert "/redfish/v1/" in paths or "/redfish/v1" in paths
    assert cache.claim(shape_key(host), wait=0).system_path == "/redfish/v1/Systems/1"  # the shape replaced


def test_a_compliant_mixed_vendor_fleet_writes_nothing(compliant_fleet):
    """Every flavour, Dell's config-job BMC included: no PATCH, no job, no reset on any host."""
    fleet = compliant_fleet(["dell", "hpe", "supermicro", "lenovo", "generic", "generic"])
    out = run_hosts([h for h, _ in fleet], "apply", APPLY, rollout=Rollout(forks=3))
    assert [r.status for r in out.results] == ["unchanged"] * len(fleet), out.summary()
    for (host, sim), _r in zip(fleet, out.results):
        assert writes(sim) == [], f"{host.name}: {writes(sim)}"
        assert sim.count() <= FIRST_HOST_OF_A_REGISTRY, f"{host.name}: {sim.requests}"
        assert sim.bios_pending() == {}
        if sim.flavour.name == "dell":
            assert sim.jobs() == []
    assert out.registry_fetches == 5  # one per distinct registry id


def test_the_benchmark_farm_counts_every_request_per_bmc():
    """bench/bmc_farm.py (simulators in helper processes) reports the same per-BMC counts a client causes."""
    import requests

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from bmc_farm import Farm, per_host_summary

    with Farm(procs=2) as farm:
        bmcs = farm.start(3, "generic", PASSWORD)
        assert [b["name"] for b in bmcs] == ["bmc000", "bmc001", "bmc002"]
        for n, b in enumerate(bmcs):
            with requests.Session() as s:
                s.trust_env = False
                for _ in range(n + 1):
                    assert (
                        s.get(b["url"] + "/redfish/v1/Systems", auth=("admin", PASSWORD), verify=b["ca"]).status_code
                        == 200
                    )
        assert [c["total"] for c in farm.counts()] == [1, 2, 3]
        assert [c["connections"] for c in farm.counts()] == [1, 1, 1]  # one keep-alive session each
        assert per_host_summary(farm.counts())["connections_max"] == 1
        assert per_host_summary(farm.counts())["requests_max"] == 3
        farm.reset_counts()
        assert [c["total"] for c in farm.counts()] == [0, 0, 0]
        farm.comply({"Q0100": "NPS4"})
        assert [c["Q0100"] for c in farm.current()] == ["NPS4"] * 3
        fresh = farm.restart()  # factory values again, counts from zero
        assert len(fresh) == 3 and [c["Q0100"] for c in farm.current()] != ["NPS4"] * 3
        assert [c["total"] for c in farm.counts()] == [0, 0, 0]
        assert farm.errors() == []


def test_host_timeout_stops_hosts_before_their_next_request_and_never_mid_write(compliant_fleet):
    """--host-timeout on the BIOS path: a budget used up before the first request leaves the BMC untouched
    (no login, no PATCH); a sufficient budget changes nothing about the run."""
    fleet = compliant_fleet(["generic", "dell"], vendor="auto")
    out = run_hosts([h for h, _ in fleet], "apply", APPLY, rollout=Rollout(forks=2, host_timeout=1e-6))
    for (_host, sim), r in zip(fleet, out.results):
        assert r.status == "failed" and "used up its --host-timeout of 1e-06 s; stopped before logging in" in r.message
        assert sim.count() == 0, sim.requests
    out = run_hosts([h for h, _ in fleet], "apply", APPLY, rollout=Rollout(forks=2, host_timeout=120))
    assert [r.status for r in out.results] == ["unchanged"] * 2, out.summary()
    assert all(writes(sim) == [] for _, sim in fleet)


@pytest.mark.parametrize("flavour", ["generic", "dell"])
def test_a_rerun_costs_every_compliant_host_four_reads(compliant_fleet, flavour):
    """The discovery the first run did (registry, per-model paths) is on disk (numaforge.bios.discovery), so
    re-checking a compliant fleet -- the usual second run -- costs every host Systems, Bios, settings and a HEAD
    of the registry, sent at once."""
    fleet = compliant_fleet([flavour] * 3, vendor=flavour)
    hosts = [h for h, _ in fleet]
    out = run_hosts(hosts, "apply", APPLY, rollout=Rollout(forks=3))
    assert sorted(sim.count() for _, sim in fleet) == [SAME_MODEL_HOSTS] * 2 + [FIRST_HOST_OF_A_REGISTRY]
    for _, sim in fleet:
        sim.reset_counts()
        sim.gather(SAME_MODEL_HOSTS)  # sent at once: in flight together however the threads are scheduled
    out = run_hosts(hosts, "apply", APPLY, rollout=Rollout(forks=3))
    assert [r.status for r in out.results] == ["unchanged"] * 3, out.summary()
    assert [sim.count() for _, sim in fleet] == [SAME_MODEL_HOSTS] * 3, [s.requests for _, s in fleet]
    assert all(writes(sim) == [] for _, sim in fleet)
    assert (out.registry_fetches, out.registry_loaded) == (0, 1)
    for _, sim in fleet:
        sim.reset_counts()
    out = run_hosts(
        hosts, "apply", HostOptions(discovery_cache=False), rollout=Rollout(forks=3)
    )  # opting out: as a first run
    assert sorted(sim.count() for _, sim in fleet) == [SAME_MODEL_HOSTS] * 2 + [FIRST_HOST_OF_A_REGISTRY]


def test_a_stale_sessions_url_on_disk_costs_one_discovery_not_basic_auth(compliant_fleet):
    """A past run's sessions URL that this BMC does not have (other firmware): the host reads the service root,
    logs in with a session as usual, and the corrected shape is what the next run uses."""
    import json
    import os

    ((host, sim),) = compliant_fleet(["generic"], vendor="generic", auth="session")
    run_hosts([host], "plan", HostOptions())
    cache = Path(os.environ["NUMAFORGE_REDFISH_CACHE"]) / "shapes.json"
    doc = json.loads(cache.read_text())
    right = doc["shapes"][0]["shape"]["login_url"]
    doc["shapes"][0]["shape"]["login_url"] = "/redfish/v1/Old/Sessions"
    cache.write_text(json.dumps(doc))
    sim.reset_counts()
    out = run_hosts([host], "plan", HostOptions())
    [r] = out.results
    assert r.status == "unchanged", r.message
    assert not any("basic" in w for w in r.data.get("warnings") or []), r.data.get("warnings")
    assert [m for m, p in sim.requests if p.rstrip("/").endswith("Sessions")] == ["POST", "POST"]
    assert json.loads(cache.read_text())["shapes"][0]["shape"]["login_url"] == right


def _round_trips(fleet) -> list[int]:
    return sorted(sim.round_trips() for _, sim in fleet)


def test_a_compliant_host_of_a_known_model_costs_one_round_trip(compliant_fleet):
    """Issue 29: on slow BMCs the sequential round trips decide fleet time. A re-run over a compliant fleet of a
    stated model: every host sends its four reads at once (<= 4 requests, 1 round trip); with bmc.auth session
    the login and logout add a round trip each. Counted by the simulators (each answer takes LATENCY s, so
    requests sent together overlap and requests sent one after the other do not)."""
    fleet = compliant_fleet(["generic"] * 3, vendor="generic", latency=LATENCY)
    hosts = [h for h, _ in fleet]
    run_hosts(hosts, "plan", HostOptions(), rollout=Rollout(forks=3))  # fills the discovery cache
    for _, sim in fleet:
        sim.reset_counts()
    out = run_hosts(hosts, "apply", APPLY, rollout=Rollout(forks=3))
    assert [r.status for r in out.results] == ["unchanged"] * 3, out.summary()
    assert [sim.count() for _, sim in fleet] == [SAME_MODEL_HOSTS] * 3, [s.requests for _, s in fleet]
    assert _round_trips(fleet) == [SAME_MODEL_ROUND_TRIPS] * 3, [s.timeline for _, s in fleet]
    assert all(writes(sim) == [] for _, sim in fleet)
    session = [make_host(h.name, sim, "generic", "session") for h, (_, sim) in zip(hosts, fleet)]
    for _, sim in fleet:
        sim.reset_counts()
        sim.gather(SAME_MODEL_HOSTS)  # the reads (GET/HEAD); the login POST and the logout DELETE pass
    out = run_hosts(session, "apply", APPLY, rollout=Rollout(forks=3))
    assert [r.status for r in out.results] == ["unchanged"] * 3, out.summary()
    assert all(r.data["auth"] == "session" for r in out.results)
    assert [(sim.count(), sim.round_trips()) for _, sim in fleet] == [SESSION_SAME_MODEL] * 3


def test_a_changed_host_of_a_known_model_writes_in_three_round_trips(compliant_fleet):
    """Issue 29: a host whose values differ costs, before any reboot, its reads at once, the PATCH and the
    read-back of what the BMC staged (issue 25 item 5): 3 round trips (<= 4), 6 requests. The sequence is the
    real one: the PATCH comes after every read was answered, the read-back after the PATCH."""
    fleet = compliant_fleet(["generic"] * 2, vendor="generic", latency=LATENCY)
    hosts = [h for h, _ in fleet]
    run_hosts(hosts, "plan", HostOptions(), rollout=Rollout(forks=2))
    for _, sim in fleet:
        sim.set_bios(Q0100="NPS1")  # differs from the profile's NPS4
        sim.reset_counts()
        sim.gather(SAME_MODEL_HOSTS)  # the four reads; the PATCH and the read-back after it pass
    out = run_hosts(hosts, "apply", APPLY, rollout=Rollout(forks=2))
    assert [r.status for r in out.results] == ["changed"] * 2, out.summary()
    for _, sim in fleet:
        assert sim.count("PATCH") == 1 and sim.requests[-2][0] == "PATCH", sim.requests
        assert sim.requests[-1] == ("GET", "/redfish/v1/Systems/1/Bios/Settings"), sim.requests
        assert sim.bios_pending() == {"Q0100": "NPS4"}
    assert _round_trips(fleet) == [3, 3], [s.timeline for _, s in fleet]


def test_a_cold_first_apply_confirms_the_registry_while_it_is_fetched(compliant_fleet):
    """Issue 29: a first apply on a model never seen (empty discovery cache). Its first host discovers (9 requests in 6 round
    trips: root + Systems, system + Bios, settings + registry entry, registry file, PATCH, read-back); the others
    wait only for the model's paths, then send their reads and a HEAD of the registry file the first host is
    fetching at that moment -- not after the fetch -- and take 3 round trips each (6 requests). The HEAD's ETag is
    compared with the fetched document's once the fetch ends; the registry is fetched once."""
    fleet = compliant_fleet(["generic"] * 3, vendor="generic", latency=LATENCY)
    for _, sim in fleet:
        sim.set_bios(Q0100="NPS1")  # differs from the profile's NPS4
        sim.reset_counts()
    out = run_hosts([h for h, _ in fleet], "apply", APPLY, rollout=Rollout(forks=3))
    assert [r.status for r in out.results] == ["changed"] * 3, out.summary()
    assert out.registry_fetches == 1
    first = max((sim for _, sim in fleet), key=lambda s: s.count())
    others = [sim for _, sim in fleet if sim is not first]
    assert (first.count(), first.round_trips()) == (9, 6), [t[:2] for t in first.timeline]
    assert [(s.count(), s.round_trips()) for s in others] == [(6, 3)] * 2, [s.timeline for s in others]
    reg = first.flavour.registry_uri.lower().rstrip("/")
    [(fetch_start, fetch_end)] = [(t[2], t[3]) for t in first.timeline if t[0] == "GET" and t[1].lower() == reg]
    for sim in others:
        [head] = [t for t in sim.timeline if t[0] == "HEAD"]
        assert head[1].lower().rstrip("/") == reg
        assert head[2] < fetch_end, (head, fetch_start, fetch_end)  # sent while the fetch was under way
        assert sim.bios_pending() == {"Q0100": "NPS4"}


def test_gathered_requests_count_once_however_late_one_arrives_and_sequential_ones_still_count_each():
    """The simulator's gather(): two reads sent at once, the second 0.5 s late (longer than the 0.1 s answer, as a
    starved thread would send it), are one round trip; two sent one after the other are two, each held at most
    the gather's timeout."""
    import requests

    sim = BMCSimulator(flavour="generic", tls=True, username="admin", password=PASSWORD, latency=0.1).start()
    try:

        def get(delay: float = 0.0) -> None:
            time.sleep(delay)
            r = requests.get(sim.url + "/redfish/v1/Systems", verify=str(sim.ca_file), auth=("admin", PASSWORD))
            assert r.status_code == 200

        sim.reset_counts()
        sim.gather(2)
        late = threading.Thread(target=get, args=(0.5,))
        late.start()
        get()
        late.join()
        assert sim.count() == 2 and sim.round_trips() == 1, sim.timeline
        sim.reset_counts()
        sim.gather(2, timeout=0.5)
        t0 = time.monotonic()
        get()
        get()
        assert sim.count() == 2 and sim.round_trips() == 2, sim.timeline
        assert 0.5 <= time.monotonic() - t0 < 5.0  # the first waited for the second until the timeout
        t0 = time.monotonic()
        get()  # the gather is spent: later requests pass at once
        assert time.monotonic() - t0 < 0.5
    finally:
        sim.stop()
