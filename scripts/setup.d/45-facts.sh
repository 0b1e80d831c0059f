#!/usr/bin/env bash
# Host facts (issue 7): the capture commands numaforge.facts.collect runs, on this build server too
# (`invoke facts --local`, the CLI tests, and the ssh-tier tests that compare a capture over SSH with the local
# one): pciutils (lspci), numactl, util-linux (lscpu), coreutils (head, ls, uname). Managed hosts get nothing
# installed; a tool missing there becomes "absent, because ..." in the facts. Idempotent: warm runs only check.
# Needs apt_need/$SUDO from scripts/setup.sh.
set -euo pipefail

apt_need $(packages facts)
for tool in lspci numactl lscpu head; do
  command -v "$tool" >/dev/null 2>&1 || { echo "setup(facts): $tool missing after install"; exit 1; }
done
echo "setup(facts): capture tools ready ($(lspci --version 2>/dev/null | head -1); numactl present)"
