"""The secrets a deployment's servers read, and the command that adds each one's version.

Both platforms' servers read the Hugging Face token, each [access] client's key (one secret per
client, tpudeploy/config/access.py) and the front door's one certificate (tpudeploy/tlscert.py).
A client removed from the config drops out of this list, so the secrets stack stops declaring its
secret: the next apply deletes it, and Secret Manager deletes its versions with it (revoked:
"Deleting a secret is an irreversible operation. Any service or workload that attempts to access
a deleted secret receives a Not Found error", cloud.google.com/secret-manager/docs/delete-secrets).
The secrets stack declares each, preflight requires a version of each before a deploy (a node
without them boots, paid, and stops at reading them).
"""

from __future__ import annotations

from tpudeploy.config import DeployConfig


def shared(cfg: DeployConfig) -> tuple[tuple[str, str], ...]:
    """(secret id, the command that adds its version) for what every server reads."""
    keys = cfg.client_key_secret_ids
    return (
        (cfg.hf_token_secret_id, "make secret"),
        *((secret_id, _api_key_command(cfg, client)) for client, secret_id in keys.items()),
        (cfg.tls_secret_id, "make tls-cert"),
    )


def _api_key_command(cfg: DeployConfig, client: str) -> str:
    """`make api-key` alone when the config has one client (CLIENT defaults to it)."""
    return "make api-key" if len(cfg.access.clients) == 1 else f"make api-key CLIENT={client}"
