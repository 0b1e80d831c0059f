#!/usr/bin/env bash
# Wheel install test (tests/install/test_wheel.py, bmc tier): an unprivileged user, numaforge-ci, installs the
# built wheel into a fresh venv outside the repository and runs the `numaforge` command as an operator would.
# Creates the user once (no password, no login shell); idempotent. Needs root (or sudo) like the apt steps.
set -euo pipefail
USER_NAME=numaforge-ci
if id -u "$USER_NAME" >/dev/null 2>&1; then
  echo "setup(install): user $USER_NAME exists"
else
  $SUDO useradd --create-home --shell /usr/sbin/nologin "$USER_NAME"
  echo "setup(install): created user $USER_NAME ($(getent passwd "$USER_NAME" | cut -d: -f6))"
fi
home=$(getent passwd "$USER_NAME" | cut -d: -f6)
if [ ! -d "$home" ]; then   # a user made earlier without a home: give it one (pip and XDG dirs live there)
  $SUDO install -d -o "$USER_NAME" -g "$(id -gn "$USER_NAME")" -m 0755 "$home"
  echo "setup(install): created $home"
fi
command -v runuser >/dev/null || { echo "setup(install): runuser (util-linux) is missing"; exit 1; }
