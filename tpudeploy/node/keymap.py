"""The front door's key map: which keys are served now, for which client (issue 37).

Runs where the keys are: on the TPU VM's host (its boot and its key poller) and in the GKE pod's
front-door containers, so it is standard library only, imports nothing from tpudeploy, and is
shipped as this file's source (tpudeploy/render.py reads it). It is also imported by the tests.

A client's secret version (what `make api-key CLIENT=name` writes) is one or two lines:

    <current key>
    <previous key> <until, RFC 3339 UTC, e.g. 2026-12-03T07:00:00Z>

The second line exists only after a rotation (`ROTATE=1`): the previous key keeps working until
then, so agents can move to the new key without a failed request. Each key is 43 URL-safe
characters (256 random bits, tpudeploy/config/secretshape.py API_KEY_ERE).

The map (nginx `map` entries, included by templates/frontdoor_key_check.conf.j2) has one line per
served key:

    "<key id>" "<client> <digest>";

The key id is the key's first KEY_ID_CHARS characters: nginx cannot hash into a variable, so it
finds the entry by this prefix and then checks the whole key's digest with secure_link (MD5 of
"Bearer <key>", base64url without padding). The prefix holds 66 of the key's 256 random bits; the
other 190 never leave the secret, so the node stores no usable key. A payload is never echoed:
errors name the client and the line, never its content.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import os
import re
import sys

KEY_RE = re.compile(r"[A-Za-z0-9_-]{43}")
KEY_ID_CHARS = 11
CLIENT_RE = re.compile(r"[a-z][a-z0-9-]{0,23}")
_UNTIL_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
UNTIL_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


class KeyMapError(ValueError):
    """A payload or client that cannot be served; the message never holds a key."""


def parse_payload(client: str, text: str) -> list[tuple[str, datetime.datetime | None]]:
    """[(key, until or None for the current key)] of one client's secret version."""
    lines = [line for line in text.replace("\r\n", "\n").split("\n") if line.strip()]
    fix = f"run 'make api-key CLIENT={client} ROTATE=1' for a new key"
    if not lines:
        raise KeyMapError(f"client {client}: its key secret is empty; {fix}")
    if len(lines) > 2:
        raise KeyMapError(
            f"client {client}: its key secret has {len(lines)} lines, not 1 or 2; {fix}"
        )
    if not KEY_RE.fullmatch(lines[0]):
        raise KeyMapError(
            f"client {client}: line 1 is not a key shaped like make api-key's (43 URL-safe "
            f"characters, 256 random bits); {fix}"
        )
    out: list[tuple[str, datetime.datetime | None]] = [(lines[0], None)]
    if len(lines) == 2:
        parts = lines[1].split()
        if len(parts) != 2 or not KEY_RE.fullmatch(parts[0]) or not _UNTIL_RE.fullmatch(parts[1]):
            raise KeyMapError(
                f"client {client}: line 2 is not '<previous key> <until, e.g. "
                f"2026-12-03T07:00:00Z>'; {fix}"
            )
        until = datetime.datetime.strptime(parts[1], UNTIL_FORMAT).replace(tzinfo=datetime.UTC)
        out.append((parts[0], until))
    return out


def digest(key: str) -> str:
    """What secure_link compares: MD5 of the Authorization header, base64url, no padding."""
    raw = hashlib.md5(("Bearer " + key).encode("ascii")).digest()  # noqa: S324 (see module doc)
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def served(
    payloads: dict[str, str], now: datetime.datetime
) -> list[tuple[str, str, datetime.datetime | None]]:
    """[(client, key, until)] of every key served at `now`, clients in the given order. A
    previous key past its `until` is dropped; two served keys with one id are refused."""
    out = []
    seen: dict[str, str] = {}
    for client, text in payloads.items():
        if not CLIENT_RE.fullmatch(client):
            raise KeyMapError(f"{client!r} is not a client name")
        for key, until in parse_payload(client, text):
            if until is not None and until <= now:
                continue
            kid = key[:KEY_ID_CHARS]
            if kid in seen:
                raise KeyMapError(
                    f"client {client}: a key shares its first {KEY_ID_CHARS} characters with a "
                    f"key of {seen[kid]}; run 'make api-key CLIENT={client} ROTATE=1 OVERLAP=0'"
                )
            seen[kid] = client
            out.append((client, key, until))
    return out


def render(payloads: dict[str, str], now: datetime.datetime) -> str:
    """The map file's text for `payloads` (client -> secret version text) at `now`."""
    keys = served(payloads, now)
    lines = [f"# {len(keys)} keys of {len(payloads)} clients (tpudeploy/node/keymap.py)"]
    for client, key, until in keys:
        note = f"  # until {until.strftime(UNTIL_FORMAT)}" if until else ""
        lines.append(f'"{key[:KEY_ID_CHARS]}" "{client} {digest(key)}";{note}')
    return "\n".join(lines) + "\n"


def write_if_changed(path: str, text: str) -> bool:
    """Replace `path` atomically (a reader sees the old file or the new one); False when it
    already holds `text`."""
    try:
        with open(path, encoding="ascii") as fh:
            if fh.read() == text:
                return False
    except FileNotFoundError:
        pass
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o444)
    # 0444 whatever the umask, before the rename: the GKE front door's nginx reads it as another
    # user, and a reader must never see the new map with a narrower mode (the folder, 0700 on
    # the TPU VM and a memory volume of the pod's own, is what keeps others out).
    os.fchmod(fd, 0o444)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return True


def main(argv: list[str]) -> int:
    """keymap.py OUT CLIENT=PAYLOAD_FILE...: write OUT; exit 0 when it changed, 3 when not, 1 on
    a payload that cannot be served (the message names the client, never a key)."""
    if len(argv) < 2 or any("=" not in a for a in argv[1:]):
        print("usage: keymap.py OUT CLIENT=PAYLOAD_FILE...", file=sys.stderr)
        return 2
    payloads = {}
    for arg in argv[1:]:
        client, path = arg.split("=", 1)
        try:
            with open(path, encoding="ascii", errors="replace") as fh:
                payloads[client] = fh.read()
        except OSError as exc:
            print(f"client {client}: cannot read its key file: {exc.strerror}", file=sys.stderr)
            return 1
    now = datetime.datetime.now(datetime.UTC)
    try:
        text = render(payloads, now)
    except KeyMapError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0 if write_if_changed(argv[0], text) else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
