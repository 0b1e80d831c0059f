"""The kernels the lab VM boots: Debian bullseye's 5.10 (downloaded once into the cache, with its headers, so
out-of-tree modules build against it with gcc-10) and the lab kernel the kernel pipeline builds; and
out-of-tree modules built against either."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import NumaforgeError, ToolMissingError
from ..paths import cache_dir
from ..program import prog

# Debian bullseye's 5.10 kernel used until (and alongside) the lab kernel: ABI 5.10.0-46, upstream 5.10.262
DEBIAN_ABI = "5.10.0-46"
DEBIAN_VERSION = "5.10.262-1"
DEBIAN_PACKAGES = [
    f"linux-image-{DEBIAN_ABI}-amd64-unsigned",
    f"linux-headers-{DEBIAN_ABI}-amd64",
    f"linux-headers-{DEBIAN_ABI}-common",
    "linux-kbuild-5.10",
]


class LabVMError(NumaforgeError):
    """The lab VM could not be started, reached or stopped."""


@dataclass
class BootKernel:
    """A bootable kernel for the lab VM."""

    name: str  # debian | lab
    image: Path  # bzImage / vmlinuz
    release: str  # `uname -r` it reports
    build_dir: Path | None = None  # tree (or headers) to build out-of-tree modules against (make -C)
    modules_root: Path | None = None  # holds lib/modules/<release>/ (NIC driver when it is a module)
    nic_modules: list[str] = field(default_factory=list)  # relative to lib/modules/<release>/, load order
    disk_modules: list[str] = field(default_factory=list)  # virtio disk + ext4 for the persistent disk, load order
    cc: str = "gcc"


def run_checked(cmd: list[str], where: str, fix: str, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, text=True, capture_output=True, **kw)
    if proc.returncode != 0:
        raise LabVMError(
            f"`{' '.join(map(str, cmd))}` failed (rc={proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()[-1200:]}",
            where,
            fix,
        )
    return proc


# Debian builds these as modules (the lab kernel has them built in): the persistent disk's virtio-blk and ext4,
# in dependency order (modinfo depends), crc32c for ext4's checksum driver
DEBIAN_DISK_MODULES = (
    "drivers/virtio/virtio",
    "drivers/virtio/virtio_ring",
    "drivers/virtio/virtio_pci",
    "drivers/block/virtio_blk",
    "lib/crc16",
    "fs/mbcache",
    "fs/jbd2/jbd2",
    "crypto/crc32c_generic",
    "fs/ext4/ext4",
)


def debian_kernel_root() -> Path:
    """Where debian_kernel() extracts the Debian kernel (complete once `.complete` exists)."""
    return cache_dir() / "lab" / f"debian-{DEBIAN_ABI}-{DEBIAN_VERSION}"


def debian_kernel() -> BootKernel:
    """Debian bullseye's 5.10.0-46-amd64 (5.10.262-1) image + headers, extracted once into the cache."""
    from .. import debian_apt

    root = debian_kernel_root()
    release = f"{DEBIAN_ABI}-amd64"
    if not (root / ".complete").exists():
        debs = cache_dir() / "lab" / "debs"
        files = []
        for pkg in DEBIAN_PACKAGES:
            have = sorted(debs.glob(f"{pkg}_{DEBIAN_VERSION}_*.deb"))
            files.append(have[0] if have else debian_apt.download("bullseye", f"{pkg}={DEBIAN_VERSION}", debs))
        tmp = Path(tempfile.mkdtemp(prefix=".extract-", dir=root.parent))
        for deb in files:
            run_checked(["dpkg-deb", "-x", str(deb), str(tmp)], str(deb), "delete the .deb from the cache and retry")
        # the headers' Makefile includes the -common tree by absolute path; point it at our extracted copy
        mk = tmp / "usr/src" / f"linux-headers-{release}" / "Makefile"
        mk.write_text(mk.read_text().replace("/usr/src/", f"{root}/usr/src/"))
        (tmp / ".complete").write_text(DEBIAN_VERSION + "\n")
        if root.exists():
            shutil.rmtree(root)
        os.replace(tmp, root)
    return BootKernel(
        name="debian",
        image=root / "boot" / f"vmlinuz-{release}",
        release=release,
        build_dir=root / "usr/src" / f"linux-headers-{release}",
        modules_root=root,
        nic_modules=["kernel/drivers/net/ethernet/intel/e1000/e1000.ko"],
        cc="gcc-10",
        disk_modules=[f"kernel/{m}.ko" for m in DEBIAN_DISK_MODULES],
    )


def lab_kernel() -> BootKernel:
    """The kpatch helper's lab kernel (5.10.262, 4-node NUMA config, e1000 built in)."""
    try:
        from ..kernel import kpatch

        built = kpatch.lab_kernel()
    except (ImportError, AttributeError):
        raise LabVMError(
            "the lab kernel is not available in this checkout (numaforge.kernel.kpatch.lab_kernel)",
            "--kernel lab",
            f"build it with `{prog()} build-kpatch --target lab`, or use --kernel debian",
        ) from None
    get = (lambda k: built.get(k)) if isinstance(built, dict) else (lambda k: getattr(built, k, None))
    image = get("bzimage") or get("bzImage") or get("image")
    release = get("release")
    build_dir = get("build_dir") or get("tree")
    if not image or not Path(image).is_file() or not release:
        raise LabVMError(
            "the lab kernel build has no bzImage yet",
            str(image),
            f"run `{prog()} build-kpatch --target lab` (cold build ~25 min) or use --kernel debian",
        )
    return BootKernel(
        name="lab",
        image=Path(image),
        release=str(release),
        build_dir=Path(build_dir) if build_dir else None,
        cc="gcc-10",
    )


def built_kernel(lk, name: str) -> BootKernel:
    """A BootKernel of a numaforge.kernel.labkernel.LabKernel build (the lab kernel, or the same with the whole
    series built in): its bzImage, release and tree, modules built with the lab's gcc-10."""
    return BootKernel(name=name, image=Path(lk.bzimage), release=str(lk.release), build_dir=Path(lk.tree), cc="gcc-10")


def resolve_kernel(kernel: str | BootKernel) -> BootKernel:
    if isinstance(kernel, BootKernel):
        return kernel
    if kernel == "debian":
        return debian_kernel()
    if kernel == "lab":
        return lab_kernel()
    raise LabVMError(f"unknown lab kernel '{kernel}'", "--kernel", "use --kernel lab or --kernel debian")


def build_module(src_dir: Path, kernel: BootKernel, out_dir: Path | None = None) -> Path:
    """Build the out-of-tree module in src_dir (one <name>.c + Kbuild) against kernel; cached by content."""
    if kernel.build_dir is None:
        raise LabVMError(
            f"kernel '{kernel.name}' has no build tree to compile modules against",
            str(src_dir),
            "use --kernel debian or a lab kernel build with its tree",
        )
    h = hashlib.sha256(kernel.release.encode() + str(kernel.build_dir).encode())
    for f in sorted(src_dir.iterdir()):
        if f.is_file():
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    out = out_dir or cache_dir() / "lab" / "modules" / f"{src_dir.name}-{h.hexdigest()[:16]}"
    kos = sorted(out.glob("*.ko")) if out.is_dir() else []
    if kos:
        return kos[0]
    if shutil.which(kernel.cc) is None:
        raise ToolMissingError(
            f"{kernel.cc} is not installed", str(src_dir), "python -m numaforge.debian_apt install bullseye gcc-10"
        )
    tmp = Path(tempfile.mkdtemp(prefix=f".{src_dir.name}-", dir=out.parent if out.parent.exists() else _mk(out.parent)))
    for f in src_dir.iterdir():
        if f.is_file():
            shutil.copy2(f, tmp / f.name)
    run_checked(
        ["make", "-C", str(kernel.build_dir), f"M={tmp}", f"CC={kernel.cc}", "modules"],
        str(src_dir),
        "check the module source against the kernel headers",
    )
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    return sorted(out.glob("*.ko"))[0]


def _mk(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p
