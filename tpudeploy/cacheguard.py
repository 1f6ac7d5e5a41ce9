"""Restores a compile-cache archive only if every member is a plain file or directory.

The XLA compile cache is code the node executes, restored as root before vLLM starts. This file
is embedded in the startup script (`python3 - ARCHIVE DEST`) and imported by the tests, so it
uses the standard library only and keeps to Python 3.8 (the TPU VM image's python3 is older
than the project's). It reads the whole member list first and refuses the archive, extracting
nothing, when any member is a link, a device, a FIFO, has a setuid or setgid bit, an absolute
path, a `..` component, a duplicate name or an oversized total; then it writes each file itself
with O_EXCL|O_NOFOLLOW and fixed modes, so no archive field can choose an owner or a mode.
Exit status: 0 restored, 3 refused (hostile or unexpected archive), 4 unreadable (damaged).
"""

from __future__ import annotations

import os
import stat
import sys
import tarfile
import zlib

# The seed's cache is 197 MB; far above it, a "cache" is an attempt to fill the boot disk.
MAX_TOTAL_BYTES = 16 * 1024**3
MAX_MEMBERS = 200_000
REFUSED, DAMAGED = 3, 4


class Refused(Exception):
    """The archive holds something a compile cache never does."""


def member_path(name: str) -> str:
    """The member's path relative to the cache directory, or Refused."""
    if "\x00" in name or "\\" in name:
        raise Refused(f"member {name!r} has a NUL or backslash in its name")
    if name.startswith("/"):
        raise Refused(f"member {name!r} has an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Refused(f"member {name!r} climbs out of the cache directory with '..'")
    return "/".join(parts)


def check_members(members: list[tarfile.TarInfo]) -> list[tuple[str, tarfile.TarInfo]]:
    """(relative path, member) for every member, or Refused naming the first bad one."""
    if len(members) > MAX_MEMBERS:
        raise Refused(f"{len(members)} members, more than {MAX_MEMBERS}")
    seen: set[str] = set()
    total = 0
    checked = []
    for m in members:
        if m.issym() or m.islnk():
            raise Refused(f"member {m.name!r} is a link (to {m.linkname!r})")
        if not (m.isreg() or m.isdir()):
            raise Refused(f"member {m.name!r} is a device, FIFO or other special file")
        if m.mode & (stat.S_ISUID | stat.S_ISGID):
            raise Refused(f"member {m.name!r} has a setuid or setgid bit (mode {m.mode:o})")
        path = member_path(m.name)
        if path in seen:
            raise Refused(f"member {m.name!r} appears twice")
        if not path and not m.isdir():
            raise Refused(f"member {m.name!r} is a file named like the cache directory itself")
        seen.add(path)
        total += m.size
        if total > MAX_TOTAL_BYTES:
            raise Refused(f"members add up to more than {MAX_TOTAL_BYTES} bytes")
        checked.append((path, m))
    return checked


def extract(tar: tarfile.TarFile, checked: list[tuple[str, tarfile.TarInfo]], dest: str) -> None:
    """Write the checked members under `dest`: directories 0755, files 0644, owned by us."""
    for path, m in checked:
        target = os.path.join(dest, path) if path else dest
        if m.isdir():
            os.makedirs(target, mode=0o755, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        source = tar.extractfile(m)
        if source is None:
            raise Refused(f"member {m.name!r} has no data")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with source, os.fdopen(os.open(target, flags, 0o644), "wb") as out:
            while True:
                chunk = source.read(1024 * 1024)
                if not chunk:
                    break
                out.write(chunk)


def restore(archive: str, dest: str) -> int:
    """Check, then extract; print why on stderr and return the exit status."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            checked = check_members(tar.getmembers())
            extract(tar, checked, dest)
    except Refused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return REFUSED
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        print(f"unreadable archive: {exc}", file=sys.stderr)
        return DAMAGED
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python3 - ARCHIVE DEST", file=sys.stderr)
        sys.exit(2)
    sys.exit(restore(sys.argv[1], sys.argv[2]))
