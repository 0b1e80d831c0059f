#!/usr/bin/env bash
# Canary gate tier (issue 28 part 2): Debian's Prometheus server, which the ssh-tier gate tests start themselves
# (their own config, data dir and free port in tmp, scraping an exporter the test runs). Debian's package enables
# and starts a system prometheus.service; nothing here may keep running, so the install runs under a policy-rc.d
# that forbids starting services, and the unit is stopped and disabled afterwards on a machine with systemd.
# Idempotent: warm runs only check. Needs apt_need/$SUDO from scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! dpkg-query -W -f='${Status}' prometheus 2>/dev/null | grep -q "ok installed"; then
  made_policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  trap 'if [ -n "$made_policy" ]; then $SUDO rm -f /usr/sbin/policy-rc.d; fi' EXIT
  apt_need $(packages canary)
fi
if [ -d /run/systemd/system ]; then
  $SUDO systemctl disable --now prometheus.service >/dev/null 2>&1 || true
elif [ -x /etc/init.d/prometheus ]; then
  $SUDO /etc/init.d/prometheus stop >/dev/null 2>&1 || true
fi
command -v prometheus >/dev/null 2>&1 || { echo "setup(canary): prometheus missing after install"; exit 1; }
echo "setup(canary): $(prometheus --version 2>&1 | head -1) (its system service stopped; the tests start their own)"
