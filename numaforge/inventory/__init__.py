"""Inventory: model, loaders (native + Ansible YAML, line-aware errors) and secret references."""

from .model import BMCSpec, Group, HardwareSpec, Host, Inventory, KernelSpec, Location, SSHSpec  # noqa: F401


def load(path):
    """Load an inventory file (native or Ansible YAML, detected from its shape)."""
    from .loader import load_inventory

    return load_inventory(path)
