"""Invoke task modules, one per concern (inventory, kernel, bios, lab, doctor).

Tasks only parse options, call numaforge library functions and print; tasks.py collects them.
"""
