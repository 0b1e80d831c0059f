#!/usr/bin/env bash
# Process start (issue 18): write the bytecode of numaforge/, bench/ and tasks.py (__pycache__/*.pyc, git-ignored).
# With PYTHONDONTWRITEBYTECODE=1 in the environment Python never writes .pyc files itself, so every `invoke`
# compiled numaforge's modules from source again; an existing, current .pyc is still read with that variable set.
# compileall rewrites only the files whose source changed since (a warm run only checks); a file edited after
# setup is compiled from source on each start until the next setup run. The venv's packages were compiled by pip;
# pytest keeps its own (assertion-rewritten) bytecode for tests/.
set -euo pipefail
cd "$(dirname "$0")/../.."
count() { { find numaforge bench __pycache__ -name '*.cpython-*.pyc' 2>/dev/null || true; } | wc -l; }
n0=$(count)
.venv/bin/python -m compileall -q -j 0 numaforge bench tasks.py >/dev/null
n1=$(count)
echo "setup(bytecode): $n1 .pyc files current for numaforge/, bench/ and tasks.py ($((n1 - n0)) new)"
