"""Lab VM pure parts: qemu command shape, ready line, initramfs archive format and init script."""

import re
import subprocess
from pathlib import Path

from numaforge.lab import initramfs as ir
from numaforge.lab import vm


def cmd(topo: str = "backplane4") -> list[str]:
    k = vm.BootKernel("lab", Path("/k/bzImage"), "5.10.262")
    return vm.qemu_command(k, Path("/s/initrd"), Path("/s/serial.log"), 2222, topo)


def dist_map(c: list[str]) -> dict[tuple[int, int], int]:
    out = {}
    for a in c:
        if a.startswith("dist,"):
            kv = dict(x.split("=") for x in a[5:].split(","))
            out[(int(kv["src"]), int(kv["dst"]))] = int(kv["val"])
    return out


def test_nps2_is_two_sockets_of_two_nodes_12_within_32_across():
    c = cmd("nps2")
    assert c[c.index("-smp") + 1] == "4,sockets=4,cores=1,threads=1"
    assert dist_map(c) == {(0, 1): 12, (2, 3): 12, (0, 2): 32, (0, 3): 32, (1, 2): 32, (1, 3): 32}


def test_cpuless4_has_a_memory_only_node_3():
    c = cmd("cpuless4")
    assert c[c.index("-smp") + 1] == "3,sockets=3,cores=1,threads=1"
    nodes = [a for a in c if a.startswith("node,")]
    assert nodes == [
        "node,nodeid=0,cpus=0,memdev=mem0",
        "node,nodeid=1,cpus=1,memdev=mem1",
        "node,nodeid=2,cpus=2,memdev=mem2",
        "node,nodeid=3,memdev=mem3",
    ]
    assert c[c.index("-m") + 1] == "2048M" and len(dist_map(c)) == 6


def test_two_node_control():
    c = cmd("2node")
    assert c[c.index("-smp") + 1] == "2,sockets=2,cores=1,threads=1"
    assert dist_map(c) == {(0, 1): 32} and c[c.index("-m") + 1] == "1024M"


def test_unknown_topology_is_a_clear_error():
    import pytest

    with pytest.raises(vm.LabVMError) as ei:
        cmd("nps4")
    assert "nps4" in ei.value.what and "backplane4" in ei.value.fix


def test_qemu_four_sockets_four_nodes_epyc_like_distances():
    c = cmd()
    assert c[c.index("-smp") + 1] == "4,sockets=4,cores=1,threads=1"
    nodes = [a for a in c if a.startswith("node,")]
    assert nodes == [f"node,nodeid={n},cpus={n},memdev=mem{n}" for n in range(4)]
    dists = {a for a in c if a.startswith("dist,")}
    assert "dist,src=0,dst=1,val=16" in dists and "dist,src=2,dst=3,val=16" in dists
    assert "dist,src=0,dst=2,val=32" in dists and "dist,src=1,dst=3,val=32" in dists and len(dists) == 6


def test_qemu_network_is_restricted_to_one_loopback_forward():
    c = cmd()
    nets = [a for a in c if a.startswith("user,")]
    assert nets == ["user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:2222-:22"]
    assert "-accel" in c and c[c.index("-accel") + 1] == "tcg"


def test_kernel_command_line_enables_numa_balancing_and_serial_console():
    append = cmd()[cmd().index("-append") + 1].split()
    assert {"nokaslr", "numa_balancing=enable", "console=ttyS0"} <= set(append)


def test_ready_line_parse():
    text = "[ 1.0] boot\nNUMAFORGE-LAB-READY release=5.10.262 nodes=4 livepatch=yes persist=yes\n"
    assert vm.parse_ready(text) == {"release": "5.10.262", "nodes": 4, "livepatch": True, "persist": True}
    assert vm.parse_ready("[ 1.0] still booting\n") is None


def test_init_script_loads_modules_then_starts_dropbear_then_prints_ready():
    s = ir.init_script(["kernel/drivers/net/ethernet/intel/e1000/e1000.ko"], "5.10.0-46-amd64")
    i_mod = s.index("insmod /lib/modules/5.10.0-46-amd64/kernel/drivers/net/ethernet/intel/e1000/e1000.ko")
    i_db = s.index("/usr/sbin/dropbear")
    i_ready = s.index(ir.READY_MARK)
    assert i_mod < i_db < i_ready and "mount -t tracefs" in s


def test_init_script_waits_for_dropbears_listening_socket_not_a_fixed_time():
    """The ready line follows dropbear's LISTEN socket on port 22 (/proc/net/tcp), polled with a bound: no
    fixed sleep between starting dropbear and the ready line (every boot of the lab_vm tier paid 1 s for it)."""
    s = ir.init_script([], "5.10.262")
    between = s[s.index("/usr/sbin/dropbear") : s.index(ir.READY_MARK)]
    assert ":0016 00000000:0000 0A" in between and "/proc/net/tcp" in between
    assert "pidof dropbear >/dev/null || break" in between  # a dropbear that died ends the wait at once
    assert "$i -lt 100" in between  # bounded: 100 polls
    assert re.findall(r"sleep ([0-9.]+)", between) == ["0.1"]  # of 0.1 s each, and no other sleep


def test_parse_ldd():
    out = (
        "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x00007f)\n"
        "\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n"
    )
    assert ir.parse_ldd(out) == ["/lib/x86_64-linux-gnu/libz.so.1", "/lib64/ld-linux-x86-64.so.2"]


def test_newc_archive_lists_with_real_cpio(tmp_path):
    """pack_newc output read back by GNU cpio (the same format the kernel unpacks)."""
    t = ir.Tree()
    t.mkdir("root/.ssh", 0o700)
    t.add("/init", b"#!/bin/sh\necho hi\n", 0o755)
    t.add("/root/.ssh/authorized_keys", b"ssh-ed25519 AAAA x\n", 0o600)
    arc = tmp_path / "a.cpio"
    arc.write_bytes(ir.pack_newc(t.entries))
    out = subprocess.run(
        ["cpio", "-itv", "--quiet"], stdin=arc.open("rb"), capture_output=True, text=True, check=True
    ).stdout.splitlines()
    names = [ln.split()[-1] for ln in out]
    assert names == ["root", "root/.ssh", "init", "root/.ssh/authorized_keys"]
    modes = {ln.split()[-1]: ln.split()[0] for ln in out}
    assert modes["root/.ssh"] == "drwx------" and modes["init"] == "-rwxr-xr-x"
    assert modes["root/.ssh/authorized_keys"] == "-rw-------"
    assert all(ln.split()[2] == "root" for ln in out)  # owner root whoever builds it


def test_newc_refuses_entries_before_their_directory():
    import pytest

    with pytest.raises(ValueError, match="before its directory"):
        ir.pack_newc([ir.Entry("a/b", "file", 0o644, b"x")])


def test_a_half_written_ready_line_is_not_ready_yet():
    line = f"{ir.READY_MARK} release=5.10.262 nodes=4 livepatch=yes"
    assert vm.parse_ready(line[:30]) is None  # still being written to the serial log
    got = vm.parse_ready("boot noise\n" + line + "\n")
    assert (got["release"], got["nodes"], got["livepatch"]) == ("5.10.262", 4, True)


def test_boot_units_start_enabled_units_with_the_kernel_release(tmp_path):
    """The init's stand-in for systemd (the VM has none), run by the real busybox sh on a real unit file."""
    import os
    import subprocess

    from numaforge.livepatch import lifecycle

    wants = tmp_path / "wants"
    wants.mkdir()
    rel = os.uname().release
    (tmp_path / "state" / rel).mkdir(parents=True)
    unit = lifecycle.UNIT_TEXT.replace(lifecycle.STATE_DIR, str(tmp_path / "state"))
    unit = unit.replace("ExecStart=/bin/sh -c", f"ExecStart=echo %v > {tmp_path}/ran; /bin/sh -c")
    (wants / "numaforge-livepatch.service").write_text(unit)
    (wants / "skipped.service").write_text(
        f"[Unit]\nConditionPathIsDirectory={tmp_path}/nope\n[Service]\nExecStart=touch {tmp_path}/bad\n"
    )
    out = subprocess.run(
        ["/bin/busybox", "sh", "-c", ir.boot_units_script(str(wants))], capture_output=True, text=True, check=True
    ).stdout
    assert "init: started numaforge-livepatch.service" in out and "skipped" not in out
    assert (tmp_path / "ran").read_text().strip() == rel and not (tmp_path / "bad").exists()


def test_initramfs_is_written_uncompressed_and_lists_with_real_cpio(tmp_path):
    """build() writes the newc archive as is: gzip cost ~2 s of host CPU on every boot (and the guest's
    unpacking under TCG) to save a 14 MB file that qemu reads from the page cache. GNU cpio reads it back."""
    key = tmp_path / "host_key"
    key.write_bytes(b"not a real key\n")
    out = ir.build(
        tmp_path / "initramfs.cpio",
        release="5.10.262",
        host_key=key,
        authorized_key="ssh-ed25519 AAAA x",
        workload=None,
        modules={},
    )
    data = out.read_bytes()
    assert data[:6] == b"070701", data[:6]  # newc magic, not gzip's 1f 8b
    listed = subprocess.run(["cpio", "-it", "--quiet"], input=data, capture_output=True, check=True).stdout.split()
    assert b"init" in listed and b"bin/busybox" in listed and b"etc/dropbear/dropbear_ed25519_host_key" in listed
