"""Which BMCs apply pending BIOS values only through a config job the client schedules is vendor-map data
(`config_job: true`, Dell), not a branch in the apply flow; a value that is not true/false is a load error with
its file:line."""

from __future__ import annotations

import pytest

from numaforge.bios.errors import VendorMapError
from numaforge.bios.vendormap import default_vendors_dir, load_vendor_map


@pytest.mark.parametrize(
    "vendor, jobs", [("dell", True), ("hpe", False), ("lenovo", False), ("supermicro", False), ("generic", False)]
)
def test_only_dell_applies_through_a_config_job(vendor, jobs):
    assert load_vendor_map(vendor).config_job is jobs


def test_a_config_job_that_is_not_a_boolean_is_a_clear_error(tmp_path):
    text = (default_vendors_dir() / "dell.yaml").read_text().replace("config_job: true", "config_job: 'yes please'")
    (tmp_path / "dell.yaml").write_text(text)
    line = text.splitlines().index("config_job: 'yes please'") + 1
    with pytest.raises(VendorMapError) as e:
        load_vendor_map("dell", tmp_path)
    assert "config_job" in e.value.what and "'yes please'" in e.value.what
    assert e.value.where == f"{tmp_path / 'dell.yaml'}:{line}" and "config_job: true" in e.value.fix
