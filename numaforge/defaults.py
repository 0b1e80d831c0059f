"""Defaults that task signatures and --help texts show, in a module that imports nothing.

`invoke --list` and `invoke TASK --help` build every task's options, so their defaults cannot live in the
pipelines (importing numaforge.kernel.backport costs gitpython; numaforge.hostos.run costs paramiko; issue 18).
The pipelines take them from here too: one definition each.
"""

# kernel pipeline: the 5.10 tree `backport` uses without --source, and the patch series under patches/
DEFAULT_DEBIAN = "debian:linux-source-5.10=5.10.262-1"
# the newest Debian kernel source (bookworm-security): the base of the series' mainline copy (issue 42 item 7)
MAINLINE_DEBIAN = "debian:linux-source-6.12=6.12.118-1~deb12u1"
DEFAULT_SERIES = "sched-numa-prefer-local-fallback"
# the lab kernel's config recipes (numaforge.kernel.labkernel.LAB_CONFIGS), chosen by $NUMAFORGE_LAB_CONFIG: tiny
# (tinyconfig + kpatch/lab/tiny.fragment, issue 43 item 1: about 80 s less of a first setup) or defconfig (the
# studies are pinned to it: amendment 8's matrix)
LAB_CONFIG_NAMES = ("defconfig", "tiny")
# Back to defconfig on 2026-12-08: on the tiny kernel the lab_vm tier's probe-direction VM panicked twice in three
# whole-suite runs (int3 at a jump-label site in __schedule / ttwu_do_wakeup as tracing switched on, in TCG;
# docs/lab.md, "Known, not fixed"), which the defconfig kernel never did in its runs and amendment 8's chunks.
DEFAULT_LAB_CONFIG = "defconfig"

# host OS pipeline: os-apply's gate, the largest allowed drop of a local share (absolute)
DEFAULT_GATE_THRESHOLD = 0.02

# hosts worked on at once (--forks) when not given: Redfish work waits on BMCs (tens of ms to seconds per
# request; a host holds at most 4 TLS connections, so 64 hosts stay far below a 1024-descriptor limit), so BMC
# tasks run more at once than tasks that drive hosts over SSH. OpenStack Ironic's conductor works on up to 100
# nodes at once by default ([conductor] workers_pool_size). --forks is parallelism, not the blast radius: how many
# hosts a --reboot run may reset before the first is checked is --canary/--batch/--max-fail's to say.
# docs/BENCHMARKS.md (issue 29) measures 32 against 64 on a 50-BMC fleet.
FORKS_BMC = 64
FORKS_SSH = 8
FORKS_LIVEPATCH = 4  # validate / livepatch-install: kernel changes, canary first

# Redfish (BMC tasks' --bmc-connect-timeout / --bmc-read-timeout / --bmc-retries; numaforge.bios.exchange.RetryPolicy):
# seconds for the TCP+TLS connection, seconds for an answer to start (each read), and how many times a request
# that failed transiently (reset connection, HTTP 5xx/503, unparsable answer, connect timeout) is sent again. A
# read timeout is not retried: a BMC silent for that long is hung, and asking 3 more times cost 54 s per host.
BMC_CONNECT_TIMEOUT = 10.0
BMC_READ_TIMEOUT = 60.0
BMC_RETRIES = 3
BMC_TOTAL_TIMEOUT = 180.0  # one request, all its reads: a BMC dripping its answer (numaforge.bios.deadline)

# numa-audit: seconds between the two samples of the counters (the talk's "sustained 10 s")
AUDIT_WINDOW = 10.0
