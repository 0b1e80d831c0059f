"""Issue 26 item 7: ETags as real BMCs hand them out. The If-Match of a PATCH is the settings object's own ETag
(never the Bios's @Redfish.Settings ETag, which belongs to the resource the settings were applied to), a weak
ETag the BMC then compares strongly is not "someone else changing this BIOS", and a BMC that insists on If-Match
(428) gets its ETag fetched and the PATCH sent once more. Real HTTPS simulators on 127.0.0.1, DMTF's `redfish`
library as the client; nothing is mocked."""

from __future__ import annotations

import pytest

from numaforge.bios.apply import apply_host
from numaforge.bios.errors import RedfishPreconditionFailedError
from numaforge.bios.hostsession import connect
from numaforge.bios.resources import ServiceRoot, SettingsObject

from .test_bios_apply_bmc import _bmc_password, admin_session, host_for, opts, run, sim_factory  # noqa: F401

pytestmark = pytest.mark.bmc


def test_the_settings_object_etag_is_its_own_never_the_bios_annotation(sim_factory):
    sim = sim_factory("generic")
    sim.settings_etag, sim.annotation_etag = False, True  # the object has none; Bios' annotation has one
    with connect(host_for(sim), opts()) as client:
        bios = ServiceRoot.load(client).system().bios()
        settings = bios.settings()
        assert bios.settings_info.get("ETag")  # the current Bios's ETag (DSP8010 Settings.ETag)
        assert settings.etag is None
        assert settings.bios_etag == bios.settings_info["ETag"]  # kept for reports only


def test_an_object_without_etag_is_written_and_not_called_a_concurrent_change(sim_factory):
    """Main sent the Bios's ETag as If-Match: 412, re-plan, 412 again, "someone else is changing this BIOS"."""
    sim = sim_factory("generic")
    sim.settings_etag, sim.annotation_etag = False, True
    r = run(apply_host, host_for(sim))
    assert r.status == "changed", r.message
    assert "someone else" not in r.message and not r.data.get("replanned_after_412")
    assert sim.bios_pending()


def test_the_first_patch_never_carries_the_bios_etag(sim_factory):
    """Issue 41 item 8: a settings object without an ETag got the Bios's @Redfish.Settings ETag as If-Match on
    the first PATCH (412, then a second PATCH without it). The first PATCH is the only one, and no 412 quirk is
    worked around."""
    sim = sim_factory("generic")
    sim.settings_etag, sim.annotation_etag = False, True
    r = run(apply_host, host_for(sim))
    assert r.status == "changed", r.message
    assert sim.count("PATCH") == 1, sim.requests
    assert not any("412" in w for w in r.data.get("warnings", [])), r.data.get("warnings")


def test_a_weak_etag_the_bmc_compares_strongly_is_a_quirk_not_someone_else(sim_factory):
    sim = sim_factory("generic")
    sim.strong_if_match = True  # refuses If-Match W/"x" although its ETag is W/"x"
    r = run(apply_host, host_for(sim))
    assert r.status == "changed", r.message
    assert sim.count("PATCH") == 2 and sim.bios_pending()
    assert not r.data.get("replanned_after_412")
    assert any("ETag quirk, not a concurrent change" in w and 'If-Match "' in w for w in r.data["warnings"])


def test_a_real_change_between_read_and_patch_is_still_a_412(sim_factory):
    sim = sim_factory("generic")
    sim.strong_if_match = True
    with connect(host_for(sim), opts()) as client:
        settings = ServiceRoot.load(client).system().bios().settings()
        admin_session(sim).patch(
            sim.url + sim.settings_path, json={"Attributes": {"Q0202": "x"}}, headers={"If-Match": settings.etag[2:]}
        ).raise_for_status()
        with pytest.raises(RedfishPreconditionFailedError) as pf:
            settings.commit({"Q0107": "Performance"})
        assert "changed since it was read (Q0202)" in pf.value.what
    assert sim.count("PATCH") == 2  # theirs and our first: nothing re-sent


def test_428_precondition_required_fetches_the_etag_and_retries_once(sim_factory):
    """A SettingsObject known only by its path and values (no ETag at hand) on a BMC that requires If-Match."""
    sim = sim_factory("generic")
    sim.require_if_match = True
    with connect(host_for(sim), opts()) as client:
        attrs = ServiceRoot.load(client).system().bios().settings().attributes
        obj = SettingsObject(client, sim.settings_path, {"Attributes": attrs})
        assert obj.etag is None
        assert obj.commit({"Q0107": "Performance"}).status < 300
        assert any("428 Precondition Required" in w and "sent it again once" in w for w in client.warnings)
    assert sim.count("PATCH") == 2 and sim.bios_pending() == {"Q0107": "Performance"}


def test_428_from_a_bmc_that_publishes_no_etag_fails_the_host_with_the_fix(sim_factory):
    sim = sim_factory("generic")
    sim.settings_etag, sim.require_if_match = False, True
    r = run(apply_host, host_for(sim))
    assert r.status == "failed"
    assert "428 Precondition Required" in r.message and "publishes no ETag" in r.message
    assert "nothing was written" in r.message and "BMC firmware" in r.message
    assert "fix the attribute" not in r.message and "someone else" not in r.message
    assert sim.count("PATCH") == 1 and sim.bios_pending() == {}
