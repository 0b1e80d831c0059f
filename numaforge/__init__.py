"""numaforge: kernel live-patch and BIOS tuning pipelines for EPYC + GPUDirect fleets on Linux 5.10 LTS."""

__version__ = "0.1.0"
