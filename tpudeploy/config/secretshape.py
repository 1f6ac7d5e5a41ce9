"""What a secret looks like: the formats the boot accepts, and values that must never be config."""

from __future__ import annotations

import re

# The formats the node accepts at boot (templates/startup.sh.j2 tests them with bash's =~, so
# these stay POSIX EREs) and `make secret` checks before storing. An empty version, a "\n" or a
# value with whitespace is refused with a reason instead of starting a server without a key.
# Hugging Face user access tokens are "hf_" and 34 letters; the floor leaves room for older ones.
HF_TOKEN_ERE = "^hf_[A-Za-z0-9]{30,200}$"  # noqa: S105 - a format, not a token
# `make api-key` writes secrets.token_urlsafe(32): 256 random bits as exactly 43 URL-safe
# characters, the only shape accepted wherever a key is read (the boot, `make smoke`). A key of
# any other shape was chosen by hand, not generated, and the front door's digest comparison
# (memcmp, templates/nginx.conf.j2) is safe only because the key is that random (issue 22).
API_KEY_ERE = "^[A-Za-z0-9_-]{43}$"

HF_TOKEN_RE = re.compile(HF_TOKEN_ERE)
API_KEY_RE = re.compile(API_KEY_ERE)

# Credentials that have a recognisable shape. A value like these in the config would land in
# instance metadata, Terraform state and the process list of the node.
_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a Hugging Face token", re.compile(r"hf_[A-Za-z0-9]{20,}")),
    ("a Google OAuth access token", re.compile(r"ya29\.[A-Za-z0-9_-]{10,}")),
    ("a Google API key", re.compile(r"AIza[0-9A-Za-z_-]{30,}")),
    ("an OpenAI-style API key", re.compile(r"sk-[A-Za-z0-9_-]{20,}")),
    ("a GitHub token", re.compile(r"gh[pousr]_[A-Za-z0-9]{30,}")),
    ("an AWS access key id", re.compile(r"AKIA[0-9A-Z]{16}")),
    ("a JSON web token", re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.")),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
)


def secret_shape(value: str) -> str:
    """What kind of credential `value` contains, or "" when it looks like none."""
    for what, pattern in _SHAPES:
        if pattern.search(value):
            return what
    return ""


def redact(value: object) -> object:
    """`value` with every secret-shaped string replaced, for error messages that echo input."""
    if isinstance(value, str):
        what = secret_shape(value)
        return f"<redacted: {what}>" if what else value
    if isinstance(value, list | tuple):
        return type(value)(redact(v) for v in value)
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    return value
