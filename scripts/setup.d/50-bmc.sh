#!/usr/bin/env bash
# BMC simulator tier (issue 6): the simulator is pure Python (stdlib http.server + ssl, `cryptography` for its CA),
# and its tests drive DMTF's rf_service_validator / rf_bios_settings / rf_power_reset / rf_raw_request, all from
# the venv's test extras (installed by scripts/setup.sh). No apt packages. This step checks that everything is
# there, and that DMTF's CSDL schemas are available offline next to the project (../shared/redfish/csdl).
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

csdl=../shared/redfish/csdl
if [ ! -f "$csdl/Bios_v1.xml" ] || [ ! -f ../shared/redfish/registries/Base.1.22.1.json ]; then
  echo "setup(bmc): DMTF Redfish schema bundle not found at $(cd .. && pwd)/shared/redfish"
  echo "  fix: place DMTF's DSP8010 bundle (csdl/, registries/) there; the validator runs offline from it"
  exit 1
fi
echo "setup(bmc): DMTF CSDL schemas: $(ls "$csdl" | wc -l) files in $csdl"
