"""Remote transports. ``numaforge.remote.ssh`` is the only one: paramiko with strict host keys."""
