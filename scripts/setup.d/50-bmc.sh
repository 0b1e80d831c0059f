#!/usr/bin/env bash
# BMC simulator tier (issue 6): the simulator is pure Python (stdlib http.server + ssl, `cryptography` for its CA),
# and its tests drive DMTF's rf_service_validator / rf_bios_settings / rf_power_reset / rf_raw_request, all from
# the venv's test extras (installed by scripts/setup.sh). No apt packages. This step checks that everything is
# there, and that the DMTF files the validator and tests use offline are in the repository
# (numaforge/lab/bmc/dmtf: a CSDL subset and the Base registry, DMTF's BSD-3 licence).
# Idempotent and read-only.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python

echo "setup(bmc): checking the simulator's Python modules"
"$PY" - <<'PYEOF'
import cryptography, yaml
from numaforge.lab.bmc import FLAVOURS, load_flavour
for f in FLAVOURS:
    load_flavour(f)
print(f"setup(bmc): cryptography {cryptography.__version__}; flavours {', '.join(FLAVOURS)} load")
PYEOF

missing=()
for tool in rf_service_validator rf_bios_settings.py rf_power_reset.py rf_raw_request.py; do
  [ -x ".venv/bin/$tool" ] || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup(bmc): missing DMTF tools in .venv: ${missing[*]}"
  echo "  fix: .venv/bin/pip install -e '.[test]' (redfish-service-validator, redfish-utilities)"
  exit 1
fi
echo "setup(bmc): DMTF tools present: $(.venv/bin/pip show redfish_service_validator redfish_utilities 2>/dev/null \
  | awk '/^(Name|Version):/ {printf "%s ", $2}')"

dmtf=numaforge/lab/bmc/dmtf
if [ ! -f "$dmtf/csdl/Bios_v1.xml" ] || [ ! -f "$dmtf/registries/Base.1.22.1.json" ] || [ ! -f "$dmtf/LICENSE.md" ]; then
  echo "setup(bmc): the vendored DMTF files are missing from $PWD/$dmtf"
  echo "  fix: restore them from git (git checkout -- $dmtf); see $dmtf/README.md"
  exit 1
fi
echo "setup(bmc): DMTF CSDL schemas: $(ls "$dmtf/csdl" | wc -l) files in $dmtf/csdl (vendored subset)"
