"""An emulated aarch64 Python environment: Debian arm64 rootfs + aarch64 wheels, run by qemu.

Built once under the cache dir: `debootstrap --foreign --variant=minbase` fetches
the arm64 Python packages from the machine's configured Debian mirror, their
.debs are unpacked with dpkg-deb (maintainer scripts are not needed for Python),
the aarch64 wheels of the pinned requirements are installed into `pysite/`, and
`bin/python` is a launcher: `qemu-aarch64-static -L ROOTFS ROOTFS/usr/bin/python3`.
No binfmt registration, no chroot and no root at run time.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

SUITE = "bookworm"


class Arm64Error(RuntimeError):
    pass


def _mirror() -> str:
    """The Debian mirror apt already uses on this machine."""
    texts = []
    for p in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        try:
            texts.append(p.read_text())
        except OSError:
            continue
    for t in texts:
        m = re.search(r"^URIs:\s*(\S+/debian)\s*$", t, re.M) or re.search(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+/debian)\s", t, re.M)
        if m:
            return m.group(1)
    raise Arm64Error("no Debian mirror found in /etc/apt/sources.list(.d); configure apt first")


def build(env_dir: Path, requirements: str, converter_python: str | None, echo: Callable[[str], None] = print) -> str:
    for tool, pkg in (("qemu-aarch64-static", "qemu-user-static"), ("debootstrap", "debootstrap"), ("dpkg-deb", "dpkg")):
        if shutil.which(tool) is None:
            raise Arm64Error(f"{tool} not found; install it with: apt-get install -y {pkg}")
    rootfs = env_dir / "rootfs"
    rootfs.mkdir(parents=True, exist_ok=True)
    echo(f"debootstrap arm64 {SUITE} (minbase + python3) into {rootfs}")
    r = subprocess.run(["debootstrap", "--arch=arm64", "--foreign", "--variant=minbase", "--include=python3", SUITE, str(rootfs), _mirror()],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise Arm64Error(f"debootstrap failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    debs = sorted((rootfs / "var/cache/apt/archives").glob("*.deb"))
    echo(f"unpacking {len(debs)} packages")
    for deb in debs:
        data = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "--keep-directory-symlink", "-C", str(rootfs)], input=data, check=True, capture_output=True)
    pys = sorted(rootfs.glob("usr/bin/python3.[0-9]*"))
    pys = [p for p in pys if re.fullmatch(r"python3\.\d+", p.name)]
    if not pys:
        raise Arm64Error("the arm64 rootfs has no python3.X")
    py = pys[-1]
    ver = py.name.removeprefix("python")
    site = env_dir / "pysite"
    echo(f"installing aarch64 wheels ({Path(requirements).name}) for Python {ver}")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--only-binary=:all:", "--target", str(site),
                        "--platform", "manylinux2014_aarch64", "--platform", "manylinux_2_17_aarch64", "--python-version", ver,
                        "--implementation", "cp", "-r", requirements], capture_output=True, text=True)
    if r.returncode != 0:
        raise Arm64Error(f"pip could not fetch the aarch64 wheels: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    launcher = env_dir / "bin" / "python"
    launcher.parent.mkdir(parents=True, exist_ok=True)
    conv = f'export OFUZZ_MNN_CONVERTER="{converter_python}"\n' if converter_python else ""
    launcher.write_text(
        "#!/bin/sh\n# emulated aarch64 Python (ofuzz)\n"
        f'export PYTHONPATH="{site}"\n{conv}'
        f'exec qemu-aarch64-static -L "{rootfs}" "{py}" "$@"\n'
    )
    launcher.chmod(0o755)
    r = subprocess.run([str(launcher), "-c", "import platform, numpy; print(platform.machine())"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "QEMU_CPU": "max"})
    if r.returncode != 0 or "aarch64" not in r.stdout:
        raise Arm64Error(f"the emulated Python does not start: {(r.stderr or r.stdout).strip()[-300:]}")
    echo("emulated python: " + r.stdout.strip())
    return str(launcher)
