#!/usr/bin/env bash
# Benchmarks (issue 8, bench/): Ansible from PyPI into the project venv, for bench/bios_fleet.py's side-by-side
# run against community.general.redfish_config (the `ansible` package ships community.general). The SSH fleet
# benchmark reuses the ssh tier's peers (openssh-server, iproute2: 15-ssh-test-peers.sh) and the BIOS ones the
# BMC simulator (50-bmc.sh); nothing else is needed. Idempotent: a warm run only checks.
# setup: the test suite's only
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
ANSIBLE_SPEC="ansible>=11,<15"

have() {
  "$PY" - <<'PYEOF'
import importlib.util, json, pathlib, sys
spec = importlib.util.find_spec("ansible_collections")
ok = False
for loc in (spec.submodule_search_locations if spec else []):
    m = pathlib.Path(loc) / "community/general/plugins/modules/redfish_config.py"
    if m.exists():
        ok = True
sys.exit(0 if ok and pathlib.Path(sys.executable).with_name("ansible-playbook").exists() else 1)
PYEOF
}

if have; then
  echo "setup(bench): ansible present: $(.venv/bin/ansible-playbook --version 2>/dev/null | sed -n 1p)"
else
  echo "setup(bench): pip install '$ANSIBLE_SPEC' into .venv (community.general.redfish_config for bench/bios_fleet.py)"
  .venv/bin/pip install -q --disable-pip-version-check "$ANSIBLE_SPEC"
  have || { echo "setup(bench): community.general.redfish_config still missing after installing ansible"; exit 1; }
  echo "setup(bench): installed $(.venv/bin/ansible-playbook --version 2>/dev/null | sed -n 1p)"
fi
for tool in /usr/sbin/sshd ip; do
  command -v "$tool" >/dev/null || { echo "setup(bench): $tool missing (scripts/setup.d/15-ssh-test-peers.sh installs it)"; exit 1; }
done
echo "setup(bench): benchmarks: bench/bios_fleet.py, bench/ssh_fleet.py, bench/bios_scaling.py (docs/BENCHMARKS.md)"
