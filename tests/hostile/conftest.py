"""tests/hostile's modules import harness (this directory on sys.path); the tier's closing counts are printed by
tests/conftest.py through hostile_summary.print_summary (the xdist controller loads only that conftest)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
