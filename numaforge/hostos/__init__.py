"""Host OS tuning next to the BIOS: profile -> plan -> apply -> verify over SSH (docs/HOSTOS.md)."""
