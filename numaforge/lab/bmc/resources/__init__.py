"""Redfish resources of the simulator, one module per resource kind. Each module's ``register(sim)`` adds its
routes to ``sim.router``; handlers take a Request and return a SimResponse."""

from __future__ import annotations

from . import bios, jobs, managers, registries, root, sessions, systems


def register_all(sim) -> None:
    for module in (root, sessions, systems, bios, managers, registries, jobs):
        module.register(sim)
