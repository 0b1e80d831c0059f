"""numa-audit: read-only NUMA findings per host (docs/numa-audit.md).

parse.py (pure parsers of kernel files), rules.py (pure rules: data in, findings out), run.py (one POSIX-sh
snapshot over SSH, two samples a window apart, per host and over the fleet runner).
"""
