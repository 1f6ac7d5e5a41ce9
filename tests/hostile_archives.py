"""Hostile compile-cache archives of issue 22, built cheaply: raw tar headers, gzip-compressed.

Shared by tests/render/test_cacheguard.py (the guard on its own) and
tests/render/test_boot_hardening.py (the
same archives restored by the rendered startup script, each of which must end in a cold boot).
"""

from __future__ import annotations

import functools
import gzip
import io
import tarfile
from collections.abc import Callable

from tpudeploy import cacheguard

BLOCK = tarfile.BLOCKSIZE


def header(info: tarfile.TarInfo, *, size_field: bytes | None = None) -> bytes:
    """One ustar header for `info`; `size_field` (12 bytes) replaces the size as stored, with
    the checksum recomputed, so a header can carry what tarfile itself would never write."""
    buf = bytearray(info.tobuf(format=tarfile.USTAR_FORMAT))
    if size_field is not None:
        assert len(size_field) == 12
        buf[124:136] = size_field
        buf[148:156] = b" " * 8
        buf[148:156] = b"%06o\0 " % sum(buf[:BLOCK])
    return bytes(buf)


def regular(name: str, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode = size, 0o644
    return info


def gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def negative_size() -> bytes:
    """A member whose size is -512 (GNU base-256): tarfile on a CPython without the
    CVE-2025-8194 fix computes the next header's offset as this header's own and reads it
    forever. About 90 bytes compressed."""
    size = b"\xff" * 10 + (2**16 - BLOCK).to_bytes(2, "big")  # GNU base-256 for -512
    first = header(regular("./xla_cache/jit_decode"))  # at offset 0 tarfile would stop instead
    return gz(first + header(regular("./xla_cache/jit_loop"), size_field=size) + bytes(2 * BLOCK))


def pax_negative_size() -> bytes:
    """A PAX `size=-512` record on a regular member: the size tarfile seeks by comes from the
    record, after the ustar header was parsed."""
    record = b"13 size=-512\n"  # a PAX record counts its own length: 2 + 1 + 10
    pax = regular("././@PaxHeader", len(record))
    pax.type = tarfile.XHDTYPE
    body = record + bytes(-len(record) % BLOCK)
    return gz(header(pax) + body + header(regular("./xla_cache/a")) + bytes(2 * BLOCK))


def huge_pax_header(size: int = 1024**3) -> bytes:
    """An extended header declaring `size` bytes (1 GiB), which tarfile reads whole into memory
    before parsing. Only its first block of records follows: the guard must refuse it by the
    declared size, before reading any of it (issue 22: 4 min and 1 GiB, then accepted)."""
    pax = regular("././@PaxHeader", size)
    pax.type = tarfile.XHDTYPE
    record = b"30 comment=" + b"a" * 18 + b"\n"
    return gz(header(pax) + record * (BLOCK // len(record)))


@functools.cache
def many_members(count: int = cacheguard.MAX_MEMBERS + 1) -> bytes:
    """`count` empty members with distinct names, then a damaged end (a GNU long name followed
    by a block that is no header, which tarfile reports as a ReadError): a guard that reads to
    the end before counting finds the archive damaged; one that counts while reading refuses
    it at the limit without reaching the end."""
    longname = regular("././@LongLink", 16)
    longname.type = tarfile.GNUTYPE_LONGNAME
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1, mtime=0) as stream:
        for i in range(count):
            stream.write(header(regular(f"./xla_cache/e{i:07d}")))
        stream.write(header(longname) + b"x" * BLOCK + b"\x01" * BLOCK + bytes(2 * BLOCK))
    return out.getvalue()


def hard_link() -> bytes:
    """What GNU tar writes for a second name of one file without --hard-dereference."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        tar.addfile(regular("./xla_cache/a", 3), io.BytesIO(b"abc"))
        link = regular("./xla_cache/b")
        link.type, link.linkname = tarfile.LNKTYPE, "./xla_cache/a"
        tar.addfile(link)
    return out.getvalue()


HOSTILE: dict[str, tuple[Callable[[], bytes], str]] = {
    "negative-size": (negative_size, "negative size"),
    "pax-negative-size": (pax_negative_size, "negative size"),
    "huge-pax-header": (huge_pax_header, "extended header"),
    "many-members": (many_members, f"more than {cacheguard.MAX_MEMBERS} members"),
    "hard-link": (hard_link, "is a link"),
}
