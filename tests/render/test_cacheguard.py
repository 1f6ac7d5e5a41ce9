"""tpudeploy/cacheguard.py on its own: what it refuses, that a refusal extracts nothing, and
that it runs on the node's older python3 (tests/render/test_startup_script.py runs it inside a
boot)."""

from __future__ import annotations

import ast
import io
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.hostile_archives import HOSTILE, many_members
from tpudeploy import cacheguard
from tpudeploy.render import cache_guard_source


def archive(path: Path, *members: tuple[tarfile.TarInfo, bytes | None]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def entry(
    name: str, kind: bytes = tarfile.REGTYPE, mode: int = 0o644, link: str = ""
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = kind, mode, link
    return info


def test_plain_files_and_directories_are_restored_with_fixed_modes(tmp_path: Path) -> None:
    src = archive(
        tmp_path / "ok.tar.gz",
        (entry(".", tarfile.DIRTYPE, 0o777), None),
        (entry("./xla_cache", tarfile.DIRTYPE, 0o777), None),
        (entry("./xla_cache/jit_decode", mode=0o777), b"compiled"),
    )
    dest = tmp_path / "cache"
    dest.mkdir()
    assert cacheguard.restore(str(src), str(dest)) == 0
    restored = dest / "xla_cache" / "jit_decode"
    assert restored.read_bytes() == b"compiled"
    # The archive asked for 0777: the guard decides modes, not the archive.
    assert stat.S_IMODE(restored.stat().st_mode) == 0o644


@pytest.mark.parametrize(
    ("member", "why"),
    [
        ((entry("./evil", tarfile.SYMTYPE, link="/etc/shadow"), None), "is a link"),
        ((entry("./evil", tarfile.LNKTYPE, link="/etc/shadow"), None), "is a link"),
        ((entry("./evil", tarfile.CHRTYPE), None), "device, FIFO"),
        ((entry("./evil", tarfile.FIFOTYPE), None), "device, FIFO"),
        ((entry("./evil", mode=0o4755), b"x"), "setuid or setgid"),
        ((entry("./evil", mode=0o2755), b"x"), "setuid or setgid"),
        ((entry("../evil"), b"x"), "climbs out"),
        ((entry("./a/../../evil"), b"x"), "climbs out"),
        ((entry("/etc/cron.d/evil"), b"x"), "absolute path"),
        ((entry("./xla_cache/jit_decode"), b"again"), "appears twice"),
    ],
)
def test_a_bad_member_refuses_the_whole_archive(
    tmp_path: Path, member: tuple[tarfile.TarInfo, bytes | None], why: str
) -> None:
    good = (entry("./xla_cache/jit_decode"), b"compiled")
    src = archive(tmp_path / "bad.tar.gz", good, member)
    dest = tmp_path / "cache"
    dest.mkdir()
    done = subprocess.run(
        [sys.executable, "-", str(src), str(dest)],
        input=cache_guard_source(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == cacheguard.REFUSED, done.stderr
    assert why in done.stderr
    assert list(dest.iterdir()) == []  # not even the good member
    assert not (tmp_path / "evil").exists()


def test_a_damaged_archive_is_unreadable_not_a_crash(tmp_path: Path) -> None:
    src = tmp_path / "damaged.tar.gz"
    src.write_bytes(b"\x1f\x8b\x08\x00not a gzip stream")
    assert cacheguard.restore(str(src), str(tmp_path)) == cacheguard.DAMAGED


def test_an_oversized_archive_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cacheguard, "MAX_TOTAL_BYTES", 10)
    src = archive(tmp_path / "big.tar.gz", (entry("./a"), b"x" * 6), (entry("./b"), b"y" * 6))
    dest = tmp_path / "cache"
    dest.mkdir()
    assert cacheguard.restore(str(src), str(dest)) == cacheguard.REFUSED
    assert list(dest.iterdir()) == []


def test_the_guard_parses_as_python_3_8() -> None:
    """The TPU VM image's python3 is older than the project's 3.11."""
    ast.parse(cache_guard_source(), feature_version=(3, 8))


# --- issue 22, item 3: bounded in time and memory ----------------------------------------------

# Each hostile archive is refused in about a second; the bound is generous for a shared machine
# and far below "forever" (the negative size looped tarfile; a million members took 2 min).
REFUSAL_SECONDS = 30


def run_guard(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-", *args],
        input=cache_guard_source(),
        capture_output=True,
        text=True,
        check=False,
        timeout=REFUSAL_SECONDS,
    )


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_archive_is_refused_while_reading_extracting_nothing(
    tmp_path: Path, kind: str
) -> None:
    """Issue 22: a negative size hung the restore, oversized headers and a million members took
    minutes and hundreds of MB, a hard link (which the packer stored) was refused forever."""
    make, why = HOSTILE[kind]
    src = tmp_path / f"{kind}.tar.gz"
    src.write_bytes(make())
    dest = tmp_path / "cache"
    dest.mkdir()
    done = run_guard(str(src), str(dest))
    assert done.returncode == cacheguard.REFUSED, done.stderr
    assert why in done.stderr
    assert list(dest.iterdir()) == []
    # The packer's check says the same, so no such archive is ever uploaded.
    checked = run_guard("--check", str(src))
    assert (checked.returncode, checked.stderr) == (done.returncode, done.stderr)


def test_the_member_limit_is_enforced_while_reading() -> None:
    """The many-members archive ends damaged after its members: refusing it (not calling it
    damaged) means the guard stopped at the limit instead of reading to the end."""
    src = io.BytesIO(many_members(10))
    with tarfile.open(fileobj=src, mode="r|gz") as tar, pytest.raises(tarfile.ReadError):
        for _ in tar:
            pass


def test_memory_stays_flat_however_many_members() -> None:
    with tarfile.open(
        fileobj=io.BytesIO(many_members(500)), mode="r|gz", tarinfo=cacheguard.GuardedTarInfo
    ) as tar:
        held = []
        with pytest.raises((tarfile.ReadError, EOFError)):
            for _ in cacheguard.members(tar):
                held.append(len(tar.members))  # type: ignore[attr-defined]
    assert len(held) == 500 and max(held) == 1


def test_check_accepts_what_restore_accepts(tmp_path: Path) -> None:
    src = archive(
        tmp_path / "ok.tar.gz",
        (entry(".", tarfile.DIRTYPE), None),
        (entry("./xla_cache/jit_decode"), b"compiled"),
    )
    assert run_guard("--check", str(src)).returncode == 0
    dest = tmp_path / "cache"
    dest.mkdir()
    assert run_guard(str(src), str(dest)).returncode == 0
    assert (dest / "xla_cache" / "jit_decode").read_bytes() == b"compiled"
