#!/usr/bin/env bash
# SSH tier (issue 5 transport, issue 8 fleet): the real peers the `ssh` tests start themselves —
# OpenSSH sshd (+ sftp-server, ssh-keygen, ssh-agent), dropbear (the lab VM's SSH server), iproute2 for
# the network-namespace "hosts", sudo + passwd (useradd/chpasswd) for the non-root sudo tests, and
# coreutils' sha256sum on the "host" side. Nothing is started or enabled here:
# the tests run their own sshd processes on loopback / inside namespaces and stop them afterwards.
# Idempotent: warm runs only check. Needs apt_need/$SUDO from scripts/setup.sh.
set -euo pipefail

apt_need $(packages ssh)

# Debian's postinst may enable/start the system sshd; the tests never use it. Do not touch it further.
for tool in /usr/sbin/sshd /usr/sbin/dropbear dropbearkey ssh-keygen ssh-agent ip sudo useradd sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || { echo "setup: $tool missing after install"; exit 1; }
done
# sshd refuses to start without its privilege-separation directory
[ -d /run/sshd ] || $SUDO mkdir -p -m 0755 /run/sshd
echo "setup: ssh test peers ready ($(/usr/sbin/sshd -V 2>&1 | head -1 || true))"
