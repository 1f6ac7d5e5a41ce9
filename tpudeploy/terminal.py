"""Text from the node or a server, made safe for the operator's terminal before it is printed."""

from __future__ import annotations

import re

# A node (or whoever holds its account) writes its guest attributes and its API's answers: an
# escape sequence there could rewrite the operator's screen, retitle the window or plant text in
# the clipboard (OSC 52). Whole sequences go (CSI, OSC and other ESC forms, ECMA-48), then every
# remaining C0 and C1 control and DEL, newlines and tabs included, becomes "?"; so do the
# bidirectional overrides that reorder what a line appears to say (Unicode TR#9).
_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI ... final byte
    r"|\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC ... BEL or ST
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    r"|\x9d[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # 8-bit OSC
    r"|\x1b[ -/]*[0-~]?"  # any other escape (charset, keypad, single shifts)
)
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: object) -> str:
    """`text` with escape sequences removed and every other control character shown as "?"."""
    return _CONTROLS.sub("?", _SEQUENCES.sub("", str(text)))
