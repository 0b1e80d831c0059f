"""The built-in lab: the 4-NUMA-node qemu VM (vm.py, initramfs.py, workload/) and the BMC simulator (bmc/)."""
