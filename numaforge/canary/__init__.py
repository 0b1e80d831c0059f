"""The SLO canary gate for rollouts (docs/canary-gate.md): decide.py (pure matrix, skewness, Pearson r and its
exact p-value), prometheus.py (Prometheus HTTP API client), gate.py (the per-minute loop, the fleet hook)."""
