"""The front door's key map (tpudeploy/node/keymap.py): which keys are served, for whom, until
when, and that no error or map line ever holds a whole key."""

from __future__ import annotations

import base64
import datetime
import hashlib
import secrets
from pathlib import Path

import pytest

from tpudeploy.config.secretshape import API_KEY_RE
from tpudeploy.node import keymap

NOW = datetime.datetime(2026, 12, 3, 6, 0, tzinfo=datetime.UTC)


def _key() -> str:
    return secrets.token_urlsafe(32)


def test_the_digest_is_what_secure_link_computes_for_the_header() -> None:
    key = _key()
    raw = hashlib.md5(f"Bearer {key}".encode()).digest()  # noqa: S324 (nginx secure_link)
    assert base64.urlsafe_b64decode(keymap.digest(key) + "==") == raw
    assert keymap.KEY_RE.pattern.strip("^$") in API_KEY_RE.pattern


def test_a_rotated_key_is_served_until_its_overlap_ends_then_dropped() -> None:
    new, old, ci = _key(), _key(), _key()
    payloads = {"planner": f"{new}\n{old} 2026-12-03T06:30:00Z\n", "ci": ci + "\n"}
    text = keymap.render(payloads, NOW)
    lines = text.splitlines()[1:]
    assert lines[0] == f'"{new[:11]}" "planner {keymap.digest(new)}";'
    assert lines[1].startswith(f'"{old[:11]}" "planner {keymap.digest(old)}";')
    assert "until 2026-12-03T06:30:00Z" in lines[1]
    assert lines[2] == f'"{ci[:11]}" "ci {keymap.digest(ci)}";'
    later = keymap.render(payloads, NOW + datetime.timedelta(minutes=30))
    assert old[:11] not in later and new[:11] in later
    # No line holds more of a key than its id.
    for key in (new, old, ci):
        assert key not in text and key[: keymap.KEY_ID_CHARS + 1] not in text


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ("", "is empty"),
        ("abc\n", "line 1 is not a key"),
        ("{k}\n{k2}\n{k}\n", "3 lines"),
        ("{k}\n{k2}\n", "line 2 is not"),
        ("{k}\n{k2} tomorrow\n", "line 2 is not"),
    ],
)
def test_a_bad_payload_names_the_client_and_the_fix_never_the_key(
    payload: str, fragment: str
) -> None:
    k, k2 = _key(), _key()
    with pytest.raises(keymap.KeyMapError) as err:
        keymap.render({"coder": payload.format(k=k, k2=k2)}, NOW)
    message = str(err.value)
    assert fragment in message and "client coder" in message
    assert "make api-key CLIENT=coder ROTATE=1" in message
    assert k[:11] not in message and k2[:11] not in message


def test_two_keys_with_one_id_are_refused() -> None:
    k = _key()
    twin = k[:11] + _key()[11:]
    with pytest.raises(keymap.KeyMapError, match="shares its first 11 characters"):
        keymap.render({"a": k, "b": twin}, NOW)


def test_main_writes_only_on_change_and_names_an_unreadable_client(tmp_path: Path) -> None:
    payload = tmp_path / "planner.key"
    payload.write_text(_key() + "\n")
    out = tmp_path / "api_keys.conf"
    assert keymap.main([str(out), f"planner={payload}"]) == 0
    first = out.read_text()
    assert keymap.main([str(out), f"planner={payload}"]) == 3
    assert out.read_text() == first and out.stat().st_mode & 0o777 == 0o444
    payload.write_text(_key() + "\n")
    assert keymap.main([str(out), f"planner={payload}"]) == 0 and out.read_text() != first
    assert keymap.main([str(out), f"ci={tmp_path / 'missing'}"]) == 1
    assert keymap.main([str(out)]) == 2
