"""Does the project's Compute Engine default service account hold Editor? (`make bootstrap-check`)

A deploy identity holds tpu.nodes.create project-wide (Cloud TPU evaluates no resource attributes
in IAM Conditions and has no per-node policy), and a TPU node created without a service account
runs as the Compute Engine default account, PROJECT_NUMBER-compute@developer.gserviceaccount.com
(https://cloud.google.com/compute/docs/access/service-accounts#default_service_account), which
new projects grant the Editor role unless the organization policy
iam.automaticIamGrantsForDefaultServiceAccounts is enforced. Then a deploy identity could run a
node, and the node's code, as Editor. This reads the project's IAM policy with the user's own
credentials and says so; it never changes anything.
"""

from __future__ import annotations

from tpudeploy.gcp.resourcemanager import LookupFailed, number_and_policy

# Basic roles that reach every service: Editor is the default grant; Owner is worse.
BROAD_ROLES = ("roles/editor", "roles/owner")


def default_account(project_number: str) -> str:
    return f"{project_number}-compute@developer.gserviceaccount.com"


def broad_roles(project: str) -> tuple[str, list[str]]:
    """The default account's email and the broad roles it holds in `project` (unconditioned
    bindings only: a conditional Editor grant is somebody's deliberate choice)."""
    number, policy = number_and_policy(project)
    email = default_account(number)
    held = sorted(
        str(b.get("role"))
        for b in policy.get("bindings") or []
        if b.get("role") in BROAD_ROLES
        and f"serviceAccount:{email}" in (b.get("members") or [])
        and not b.get("condition")
    )
    return email, held


def warning(project: str) -> str:
    """One line for `make bootstrap-check`: a WARNING, an ok, or why it was not checked."""
    try:
        email, held = broad_roles(project)
    except LookupFailed as exc:
        return f"NOT CHECKED: the Compute Engine default account's roles in {project}: {exc}"
    if not held:
        return f"ok: the Compute Engine default account {email} holds no basic role in {project}"
    return (
        f"WARNING: the Compute Engine default account {email} holds {', '.join(held)} in "
        f"{project}. A deploy identity may create a TPU node without a service account (the TPU "
        "API cannot be scoped by IAM conditions), and that node would run as this account. "
        f"Remove the grant: gcloud projects remove-iam-policy-binding {project} "
        f"--member=serviceAccount:{email} --role=roles/editor (and enforce the organization "
        "policy iam.automaticIamGrantsForDefaultServiceAccounts)"
    )
