"""Firmware pipeline: BIOS profiles -> vendor attributes -> plan -> apply through Redfish -> reboot -> verify.

profile.py (Jinja2 profiles, pure), vendors.py (vendor maps, pure), registry.py + plan.py (validation and diff,
pure), redfish.py (adapter over the `redfish` library), resources/ (the client-side Redfish resources), apply.py
(entry points) over hostapply.py (one host's apply states), errors.py (typed errors); docs/architecture.md.
"""
