"""The secrets a deployment's servers read, and the command that adds each one's version.

Both platforms' servers read the Hugging Face token, the API key and the front door's one
certificate (tpudeploy/tlscert.py). The secrets stack declares each, preflight requires a version
of each before a deploy (a node without them boots, paid, and stops at reading them).
"""

from __future__ import annotations

from tpudeploy.config import DeployConfig


def shared(cfg: DeployConfig) -> tuple[tuple[str, str], ...]:
    """(secret id, the command that adds its version) for what every server reads."""
    return (
        (cfg.hf_token_secret_id, "make secret"),
        (cfg.api_key_secret_id, "make api-key"),
        (cfg.tls_secret_id, "make tls-cert"),
    )
