"""lab VM failures are clear errors (real qemu, no boot needed): a busy port, a kernel qemu cannot load,
an unknown kernel name; the qemu process is gone afterwards."""

from __future__ import annotations

import socket

import pytest
from labvm import LONG_GROUP
from sshd_fixture import free_port

from numaforge.lab import vm

pytestmark = [pytest.mark.lab_vm, pytest.mark.xdist_group(LONG_GROUP)]  # tests/labvm.py says why


def test_busy_port_is_refused_before_qemu_starts(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        k = vm.BootKernel("test", tmp_path / "bzImage", "5.10.262")
        with pytest.raises(vm.LabVMError) as exc:
            vm.up(kernel=k, state_dir=tmp_path / "state", ssh_port=port)
    assert f"127.0.0.1:{port} is already in use" in exc.value.what and exc.value.fix
    assert not (tmp_path / "state" / "vm" / "pid").exists()


def test_unbootable_kernel_reports_qemu_output_and_leaves_no_qemu(tmp_path):
    image = tmp_path / "not-a-kernel"
    image.write_text("this is not a bzImage\n")
    k = vm.BootKernel("test", image, "5.10.262")
    state = tmp_path / "state"
    with pytest.raises(vm.LabVMError) as exc:
        vm.up(kernel=k, state_dir=state, ssh_port=free_port(), boot_timeout=60)
    assert "qemu exited" in exc.value.what and "--- qemu ---" in exc.value.what
    assert "serial log tail" in exc.value.what
    assert not vm.status(state).running


def test_unknown_kernel_name():
    with pytest.raises(vm.LabVMError, match="unknown lab kernel 'vanilla'"):
        vm.resolve_kernel("vanilla")
