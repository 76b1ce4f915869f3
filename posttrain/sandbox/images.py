"""Root filesystems by name: `sandbox-base` is the host's system directories, others are local dirs.

An image is only a directory tree (there is no registry pull and no container engine here); a name maps
to a rootfs directory through `register_image` or the `POSTTRAIN_SANDBOX_IMAGES` directory
(`$POSTTRAIN_SANDBOX_IMAGES/<name>` with any `:tag` dropped). Guarantees: every bind is read-only, host
secrets that a system directory may hold (/etc/shadow, /etc/gshadow, SSH host keys) are masked.
Not here: the writable workspace, /proc and /dev (the launcher adds those).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

BASE_IMAGE = "sandbox-base"
SYSTEM_DIRS: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
MASKED_FILES: tuple[str, ...] = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
MASKED_DIRS: tuple[str, ...] = ("/etc/ssh", "/etc/sudoers.d")
_REGISTRY: dict[str, Path] = {}


class ImageError(ValueError):
    """An image name does not resolve to a rootfs directory."""


@dataclass(frozen=True)
class Rootfs:
    """How to build `/` for a sandbox: read-only binds, symlinks and masks, in order."""

    args: tuple[str, ...]
    """bubblewrap arguments creating the read-only system tree."""
    description: str
    """Human-readable summary for `check`."""


def register_image(name: str, path: str | Path) -> None:
    """Make `name` resolve to the rootfs directory `path`."""
    _REGISTRY[name.split(":")[0]] = Path(path)


def _strip_tag(name: str) -> str:
    return name.split(":")[0]


def resolve(image: str, rootfs: str | None = None) -> Rootfs:
    """The rootfs for a spec's `image` / `rootfs` fields."""
    if rootfs is not None:
        return _directory_rootfs(Path(rootfs))
    name = _strip_tag(image)
    if name == BASE_IMAGE:
        return host_rootfs()
    if name in _REGISTRY:
        return _directory_rootfs(_REGISTRY[name])
    env_dir = os.environ.get("POSTTRAIN_SANDBOX_IMAGES")
    if env_dir and (Path(env_dir) / name).is_dir():
        return _directory_rootfs(Path(env_dir) / name)
    raise ImageError(f"image {image!r} is not registered (known: {', '.join([BASE_IMAGE, *_REGISTRY])})")


def host_rootfs() -> Rootfs:
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in MASKED_FILES:
        if os.path.exists(path):
            args += ["--ro-bind", "/dev/null", path]
    for path in MASKED_DIRS:
        if os.path.isdir(path):
            args += ["--tmpfs", path, "--remount-ro", path]
    binds, _ = python_binds()
    return Rootfs((*args, *binds), "host system directories, read-only")


def _directory_rootfs(path: Path) -> Rootfs:
    if not path.is_dir():
        raise ImageError(f"rootfs directory {path} does not exist")
    return Rootfs(("--ro-bind", str(path), "/"), f"directory {path}, read-only")


def python_binds() -> tuple[tuple[str, ...], str | None]:
    """When the host has no system `python3`, bind this interpreter's prefix and name its bin dir for PATH."""
    if os.path.exists("/usr/bin/python3"):
        return (), None
    prefix = os.path.realpath(sys.base_prefix)
    return ("--ro-bind", prefix, prefix), os.path.join(prefix, "bin")


def supervisor_python() -> tuple[str, tuple[str, ...]]:
    """A real (non-shim) interpreter to run the supervisor, plus any extra read-only binds it needs."""
    for candidate in ("/usr/bin/python3", os.path.realpath(sys.executable)):
        real = os.path.realpath(candidate)
        if os.access(real, os.X_OK):
            if real.startswith(("/usr/", "/bin/", "/lib")):
                return real, ()
            prefix = os.path.realpath(sys.base_prefix)
            return real, ("--ro-bind", prefix, prefix)
    raise ImageError("no Python interpreter found for the sandbox supervisor")
