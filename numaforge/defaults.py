"""Defaults that task signatures and --help texts show, in a module that imports nothing.

`invoke --list` and `invoke TASK --help` build every task's options, so their defaults cannot live in the
pipelines (importing numaforge.kernel.backport costs gitpython; numaforge.hostos.run costs paramiko; issue 18).
The pipelines take them from here too: one definition each.
"""

# kernel pipeline: the 5.10 tree `backport` uses without --source, and the patch series under patches/
DEFAULT_DEBIAN = "debian:linux-source-5.10=5.10.262-1"
DEFAULT_SERIES = "sched-numa-prefer-local-fallback"

# host OS pipeline: os-apply's gate, the largest allowed drop of a local share (absolute)
DEFAULT_GATE_THRESHOLD = 0.02

# hosts worked on at once (--forks) when not given: Redfish work waits on BMCs (tens to hundreds of ms per
# request, one TLS connection per BMC), so BMC tasks run more at once than tasks that drive hosts over SSH
FORKS_BMC = 32
FORKS_SSH = 8
FORKS_LIVEPATCH = 4  # validate / livepatch-install: kernel changes, canary first

# numa-audit: seconds between the two samples of the counters (the talk's "sustained 10 s")
AUDIT_WINDOW = 10.0
