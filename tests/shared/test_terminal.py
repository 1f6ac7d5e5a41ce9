"""Issue 22 item 9: text the node publishes reaches the operator's terminal without escapes."""

from __future__ import annotations

import pytest

from tests.fake_boot_apis import FakeTpu
from tests.tpuvm.test_wait import cfg, run_wait  # noqa: F401 - the fixture
from tpudeploy.config import DeployConfig
from tpudeploy.terminal import printable

HOSTILE = [
    "\x1b[2J\x1b[H",  # clear the screen, cursor home
    "\x1b]0;owned\x07",  # retitle the window
    "\x1b]52;c;ZWNobyBoaQ==\x1b\\",  # OSC 52: write the clipboard
    "\x9b31m",  # 8-bit CSI
    "\r\n[0s] ready",  # a forged line
    "\u202eevil",  # right-to-left override
    "\x00\x07\x08\x7f\x85",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_no_control_character_or_escape_survives(text: str) -> None:
    shown = printable(f"ok {text} ok")
    assert shown.startswith("ok ") and shown.endswith(" ok")
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in shown)
    assert not any(c in shown for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def test_sequences_go_whole_and_plain_text_stays() -> None:
    assert printable("a\x1b[31mred\x1b[0m b") == "ared b"
    assert printable("\x1b]0;title\x07phase") == "phase"
    assert printable("line1\nline2\ttab") == "line1?line2?tab"
    plain = "secret gemma4-v5e-hf-token has no version: add one with 'make secret' (Grüße, 東京)"
    assert printable(plain) == plain


def test_make_wait_prints_the_nodes_phase_and_reason_safely(
    cfg: DeployConfig,  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    phase = "pulling\x1b[2K-image"
    reason = "bad\x1b]0;owned\x07 thing\r\n[99s] ready: vLLM is serving"
    with FakeTpu([(phase, ""), ("failed", reason)]) as fake:
        rc, out = run_wait(fake, cfg, monkeypatch)
    assert rc == 1
    assert "\x1b" not in out and "\x07" not in out
    assert "pulling-image" in out
    assert "bad thing??[99s] ready: vLLM is serving" in out
    assert "\n[99s] ready" not in out
