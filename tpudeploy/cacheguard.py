"""Restores a compile-cache archive only if every member is a plain file or directory.

The XLA compile cache is code the node executes, restored as root before vLLM starts. This file
is embedded in the startup script (`python3 - ARCHIVE DEST`, and `python3 - --check ARCHIVE`
before an upload) and imported by the tests, so it uses the standard library only and keeps to
Python 3.8 (the TPU VM image's python3 is older than the project's).

Bounded in time and memory whatever the archive holds: members are read one at a time from the
stream (tarfile would otherwise keep every header), and each header is checked as it is parsed,
before tarfile acts on it: a negative size (which sends tarfile into an endless loop on CPython
without the CVE-2025-8194 fix), an extended (PAX) or GNU long-name header over
MAX_EXTENDED_BYTES (tarfile reads it whole into memory), more than MAX_MEMBERS members or more
than MAX_TOTAL_BYTES of data is refused while reading. A first pass refuses the archive,
extracting nothing, when any member is a link, a device, a FIFO, has a setuid or setgid bit, an
absolute path, a `..` component or a duplicate name; a second pass writes each file itself with
O_EXCL|O_NOFOLLOW and fixed modes, so no archive field can choose an owner or a mode. The boot
script also runs this under `timeout` (templates/startup.sh.j2): a bad archive is a cold boot
within that bound, never a hang.
Exit status: 0 restored (or, with --check, acceptable), 3 refused (hostile or unexpected
archive), 4 unreadable (damaged).
"""

from __future__ import annotations

import os
import stat
import sys
import tarfile
import zlib
from collections.abc import Iterator
from typing import Any

# The seed's cache is 197 MB; twenty times that is no compile cache but an attempt to fill the
# disk (and to keep the boot decompressing).
MAX_TOTAL_BYTES = 4 * 1024**3
# One file per compiled program: the seed's configuration compiles hundreds, not tens of
# thousands. Refused while reading, so a million empty members cost 20,001 headers.
MAX_MEMBERS = 20_000
# A PAX record or a GNU long name holds a path (PATH_MAX 4096) and a few attributes; tarfile
# reads the whole header into memory before parsing it.
MAX_EXTENDED_BYTES = 64 * 1024
MAX_NAME_CHARS = 4096
# The guard's own address space: tarfile and gzip need a few MiB; a header that slipped past the
# limits above fails with MemoryError (a damaged archive) instead of taking the node's RAM.
MAX_MEMORY_BYTES = 1024**3
REFUSED, DAMAGED = 3, 4
_EXTENDED = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)


class Refused(Exception):
    """The archive holds something a compile cache never does."""


class GuardedTarInfo(tarfile.TarInfo):
    """A TarInfo that refuses a hostile header as it is parsed, before tarfile follows it."""

    @classmethod
    def frombuf(cls, buf: bytes | bytearray, encoding: str, errors: str) -> Any:
        info = super().frombuf(buf, encoding, errors)
        _check_size(info)
        if info.type in _EXTENDED and info.size > MAX_EXTENDED_BYTES:
            raise Refused(
                f"an extended header of {info.size} bytes (more than {MAX_EXTENDED_BYTES})"
            )
        return info

    @classmethod
    def fromtarfile(cls, tarfile: Any) -> Any:
        # A PAX `size` record replaces the header's size after frombuf: check the result too,
        # before tarfile seeks to the next header by it.
        info = super().fromtarfile(tarfile)
        _check_size(info)
        return info


def _check_size(info: tarfile.TarInfo) -> None:
    if info.size < 0:
        raise Refused(f"member {info.name!r} has a negative size ({info.size})")
    if info.size > MAX_TOTAL_BYTES:
        raise Refused(f"member {info.name!r} is larger than {MAX_TOTAL_BYTES} bytes")


def member_path(name: str) -> str:
    """The member's path relative to the cache directory, or Refused."""
    if len(name) > MAX_NAME_CHARS:
        raise Refused(f"a member name of {len(name)} characters (more than {MAX_NAME_CHARS})")
    if "\x00" in name or "\\" in name:
        raise Refused(f"member {name!r} has a NUL or backslash in its name")
    if name.startswith("/"):
        raise Refused(f"member {name!r} has an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Refused(f"member {name!r} climbs out of the cache directory with '..'")
    return "/".join(parts)


class Checker:
    """The per-member rules, with the state they need across members (names seen, bytes)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.total = 0

    def check(self, m: tarfile.TarInfo) -> str:
        """The member's relative path, or Refused naming what is wrong with it."""
        if m.issym() or m.islnk():
            raise Refused(f"member {m.name!r} is a link (to {m.linkname!r})")
        if not (m.isreg() or m.isdir()) or m.issparse():
            raise Refused(f"member {m.name!r} is a device, FIFO or other special file")
        if m.mode & (stat.S_ISUID | stat.S_ISGID):
            raise Refused(f"member {m.name!r} has a setuid or setgid bit (mode {m.mode:o})")
        path = member_path(m.name)
        if path in self.seen:
            raise Refused(f"member {m.name!r} appears twice")
        if not path and not m.isdir():
            raise Refused(f"member {m.name!r} is a file named like the cache directory itself")
        self.seen.add(path)
        self.total += m.size
        if self.total > MAX_TOTAL_BYTES:
            raise Refused(f"members add up to more than {MAX_TOTAL_BYTES} bytes")
        return path


def members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """Each member in archive order, refusing at MAX_MEMBERS while reading."""
    count = 0
    while True:
        m = tar.next()
        if m is None:
            return
        # tarfile appends every header it reads to tar.members; nothing here looks a member up
        # by name, so keep only the current one (memory stays flat however many there are).
        held: list[tarfile.TarInfo] = tar.members  # type: ignore[attr-defined]
        del held[:-1]
        count += 1
        if count > MAX_MEMBERS:
            raise Refused(f"more than {MAX_MEMBERS} members")
        yield m


def _open(archive: str) -> tarfile.TarFile:
    # "r|gz": a forward-only stream, so no member is ever revisited or sought backwards.
    return tarfile.open(archive, "r|gz", tarinfo=GuardedTarInfo)


def check_archive(archive: str) -> int:
    """Every member checked, reading the archive once: how many there are, or Refused."""
    checker = Checker()
    with _open(archive) as tar:
        for m in members(tar):
            checker.check(m)
    return len(checker.seen)


def extract(archive: str, dest: str) -> None:
    """Write the members of a checked archive under `dest`: directories 0755, files 0644."""
    checker = Checker()
    with _open(archive) as tar:
        for m in members(tar):
            path = checker.check(m)
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


def _guarded(step: Any) -> int:
    try:
        step()
    except Refused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return REFUSED
    except (tarfile.TarError, EOFError, zlib.error, OSError, MemoryError, RecursionError) as exc:
        print(f"unreadable archive: {exc}", file=sys.stderr)
        return DAMAGED
    return 0


def check(archive: str) -> int:
    """What restore would say of `archive`, extracting nothing (the packer runs this)."""
    return _guarded(lambda: check_archive(archive))


def restore(archive: str, dest: str) -> int:
    """Check every member, then extract; print why on stderr and return the exit status."""

    def both() -> None:
        check_archive(archive)
        extract(archive, dest)

    return _guarded(both)


def _limit_memory() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MAX_MEMORY_BYTES, MAX_MEMORY_BYTES))
    except (ImportError, ValueError, OSError):
        pass  # no limit available: the header limits above still hold


if __name__ == "__main__":
    _limit_memory()
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2]))
    if len(sys.argv) != 3:
        print("usage: python3 - ARCHIVE DEST | python3 - --check ARCHIVE", file=sys.stderr)
        sys.exit(2)
    sys.exit(restore(sys.argv[1], sys.argv[2]))
