"""Firmware pipeline: BIOS profiles -> vendor attributes -> plan -> apply through Redfish -> reboot -> verify.

profile.py (Jinja2 profiles, pure), vendors.py (vendor maps, pure), registry.py + plan.py (validation and diff,
pure), redfish.py (adapter over the `redfish` library), apply.py (per-host states), errors.py (typed errors).
"""
