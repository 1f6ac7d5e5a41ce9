"""Where the upstream watch's paid job may run: a self-hosted runner named by `[watch] runner`,
never a GitHub-hosted one. Standard library only: the workflow's gate imports it before `make
install`, and the config's `[watch]` table checks the same rule.

Why a GitHub-hosted runner cannot finish a run (issue 40, read from the code):
- `make accept`'s rows go to the watch node's front door, which its firewall opens to `[network]
  allowed_cidrs` only (tpudeploy/tpuvm/frontdoor.py resolve_endpoint; docs/security.md,
  "Firewall"); a GitHub-hosted runner's address is not in them.
- `make bench` runs `sudo docker exec ... vllm bench serve` over IAP SSH (tpudeploy/iapssh.py):
  IAP's tunnel role (roles/iap.tunnelResourceAccessor holds iap.tunnelInstances.accessViaIAP,
  https://docs.cloud.google.com/iam/docs/roles-permissions/iap) and OS Login admin, which is
  root on the node (docs/security.md, "Logins on the node").
- The bootstrap grants the watch identity neither (tpudeploy/identities.py watch_grants), and
  must not grant OS Login admin: a Cloud TPU node has no IAM policy of its own (the v2 API's
  nodes resource has create, delete, get, getGuestAttributes, list, patch, start and stop, no
  getIamPolicy or setIamPolicy; https://cloud.google.com/tpu/docs/reference/rest/v2/
  projects.locations.nodes), so the role could only be granted on the project, where it is root
  on every TPU VM of it: every other deployment's node too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

# "we recommend providing an array of labels that begins with self-hosted (this must be listed
# first) and then includes additional labels as needed. When you specify an array of labels,
# jobs will be queued on runners that have all the labels that you specify."
# (https://docs.github.com/en/actions/automating-your-workflow-with-github-actions/
# using-self-hosted-runners-in-a-workflow). GitHub-hosted runners never carry it: it keeps the
# paid job off them.
SELF_HOSTED = "self-hosted"
# The project's own bound, not GitHub's: the labels travel through one GITHUB_OUTPUT line as
# JSON into `runs-on`, so no newline, quote or space may reach it.
LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
EXAMPLE = ("self-hosted", "linux", "x64", "tpu-watch")
# As written in a deployment file (a JSON list of strings is a TOML array of basic strings).
EXAMPLE_TOML = json.dumps(list(EXAMPLE))

# GitHub's default variable: "The environment of the runner executing the job. Possible values
# are: `github-hosted` for GitHub-hosted runners provided by GitHub, and `self-hosted` for
# self-hosted runners configured by the repository owner." (docs.github.com/en/actions/reference/
# variables-reference: not found in the stored corpus; read in github/docs's variables table,
# which lists RUNNER_ENVIRONMENT since github/docs PR 33310, and in that wording as quoted by the
# typed runner contexts of several Actions SDKs.)
RUNNER_ENVIRONMENT = "RUNNER_ENVIRONMENT"
GITHUB_HOSTED = "github-hosted"

# What OS Login admin gives, in docs/security.md's words ("Logins on the node"): said wherever a
# user is asked to grant it.
ADMIN_GRANTS = (
    "roles/compute.osAdminLogin is root on the node: the node account's token (its secrets, "
    "the cache bucket's create-only grant, the guest attributes make wait trusts), the Hugging "
    "Face token file, the TLS proxy's private key and the containers; and a TPU node has no IAM "
    "policy of its own, so it is granted on the project: root on every TPU VM there, every "
    "other deployment's node included. Two deployments in one project then no longer keep out "
    "of each other: grant it only in a project that holds this deployment alone"
)


def runner_problem(labels: object) -> tuple[str, str] | None:
    """Why `labels` cannot be `[watch] runner` (reason, fix), or None. Empty is allowed: the
    workflow then only reports a new build. The reason holds no "; " (config/messages.py splits
    a validator's message there into reason and fix)."""
    if not isinstance(labels, list | tuple) or not all(isinstance(x, str) for x in labels):
        return (
            "must be a list of a self-hosted runner's labels",
            f"e.g. {EXAMPLE_TOML}, or leave it out (the workflow then only reports new builds)",
        )
    if not labels:
        return None
    bad = [x for x in labels if not LABEL_RE.fullmatch(x)]
    if bad:
        return (
            f"{bad[0]!r} is not a runner label this project passes on (up to 100 letters, "
            "digits, '.', '_' or '-', starting with a letter or digit)",
            f"use the runner's labels as GitHub shows them, e.g. {EXAMPLE_TOML}",
        )
    if labels[0] != SELF_HOSTED:
        return (
            f"must start with {SELF_HOSTED!r}: the paid job reaches the watch node's front door "
            "and its IAP SSH, which a GitHub-hosted runner cannot (and GitHub asks for "
            f"{SELF_HOSTED!r} first in a self-hosted runner's labels)",
            f"e.g. {EXAMPLE_TOML}: a runner of yours inside [network] allowed_cidrs",
        )
    return None


def hosted_refusal(environ: Mapping[str, str]) -> str | None:
    """Why the paid part may not start on this machine, or None: a GitHub-hosted runner pays
    for a flex-start boot it cannot judge (no way to the front door, no IAP SSH)."""
    if environ.get(RUNNER_ENVIRONMENT) != GITHUB_HOSTED:
        return None
    return (
        f"{RUNNER_ENVIRONMENT} = {GITHUB_HOSTED!r}: a GitHub-hosted runner cannot reach the watch "
        "node's front door (open to [network] allowed_cidrs only) nor run make bench (IAP SSH as "
        "root), so the run would pay for a flex-start boot and fail; fix: run the paid job on the "
        "self-hosted runner [watch] runner names (the workflow's runs-on comes from it), or run "
        "`make upstream-watch` by hand from a machine that reaches the node"
    )


def ways_forward(config: str, account: str) -> Sequence[str]:
    """The two ways to judge a new build when the workflow may not (no `[watch] runner`);
    `account` is the watch identity (`<name>-watch-apply`) the paid job authenticates as."""
    return (
        f"By hand, from a machine inside [network] allowed_cidrs with gcloud logged in as "
        f"someone holding IAP's tunnel role and OS Login admin: `make upstream-watch "
        f"DEPLOY_CONFIG={config}` (paid; OUT=dir for the verdict).",
        f"Or a self-hosted runner inside [network] allowed_cidrs, named in {config}'s [watch] "
        f"runner (e.g. {EXAMPLE_TOML}), where the job authenticates as the watch identity "
        f"{account}: you grant it roles/iap.tunnelResourceAccessor and "
        "roles/compute.osAdminLogin yourself (the bootstrap never does). Know what that grants: "
        f"{ADMIN_GRANTS}.",
    )
