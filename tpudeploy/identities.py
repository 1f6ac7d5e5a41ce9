"""The GitOps identities as data: each CI identity's roles, where, under which condition, why.

stacks/bootstrap.py turns these into IAM resources, tools/readme.py into docs/gitops.md's grant
table, and the tests evaluate every condition with a CEL interpreter: one definition for all three.
Conditions name a deployment's resources exactly (never by a name prefix: deployment `gemma4`
must not reach `gemma4-staging`'s secrets), and the names come from tpudeploy.config.DeployConfig.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tpudeploy.config import DeployConfig
from tpudeploy.gitops import STATE_PREFIX_ROOT
from tpudeploy.tpuvm.deadline_target import STOP_PERMISSIONS

# Where a grant is attached. A project-level grant reaches every resource of its kind in the
# project unless a condition narrows it; the others are attached to one resource.
PROJECT = "project"
STATE_BUCKET = "state bucket"
NODE_ACCOUNT = "node service account"
DEPLOY_ACCOUNT = "deploy service account"
PLAN_ACCOUNT = "plan service account"
STOP_ACCOUNT = "stop service account"

# What each platform's deadline job may delete is the platform's (its Platform.stop_permissions,
# from tpudeploy/tpuvm/deadline_target.py and tpudeploy/gke/deadline_target.py, with the
# documented rule).

# Custom roles (project-level definitions, granted per deployment with a condition). Predefined
# roles that would do (secretmanager.admin, storage.admin, compute.securityAdmin, tpu.admin) also
# hold version access, object access, other resource types or setIamPolicy on the project.
CUSTOM_ROLES: dict[str, tuple[str, tuple[str, ...]]] = {
    # The accessor grants on a pipeline deployment's two secrets. The secrets themselves are the
    # bootstrap's (stacks/bootstrap.py): secretmanager.secrets.create is checked on the parent
    # project ("Authorization requires the following IAM permission on the specified resource
    # parent", https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets/create),
    # which carries no secret name, so no condition naming a secret can ever grant it. No
    # secretmanager.versions.*: the deploy identity never reads or adds a version (the user does,
    # with `make secret`).
    "tpudeploySecrets": (
        "IAM of a deployment's two secrets (no version access, no create or delete)",
        (
            "secretmanager.secrets.getIamPolicy",
            "secretmanager.secrets.setIamPolicy",
        ),
    ),
    # The node account's grants on a pipeline deployment's compile-cache bucket, which the
    # bootstrap creates for the same reason: storage.buckets.create is checked on the project
    # (https://cloud.google.com/storage/docs/json_api/v1/buckets/insert), before the bucket has a
    # name to match. No storage.objects.*: the cache is code the node runs, and only the node's
    # account writes it.
    "tpudeployCacheBucket": (
        "IAM of a deployment's compile-cache bucket (no object access, no create or delete)",
        (
            "storage.buckets.get",
            "storage.buckets.getIamPolicy",
            "storage.buckets.setIamPolicy",
        ),
    ),
    # Terraform's GCS backend: read and write the state object, create and delete the .tflock
    # object (an overwrite is a delete + create), list the prefix for workspaces.
    "tpudeployState": (
        "Terraform state objects under one deployment's prefix",
        (
            "storage.objects.create",
            "storage.objects.delete",
            "storage.objects.get",
            "storage.objects.list",
        ),
    ),
    # google_compute_firewall: creating, updating or deleting a rule also needs updatePolicy on its
    # network (https://cloud.google.com/compute/docs/reference/rest/v1/firewalls/insert), and a
    # network carries no resource.name in IAM conditions (only its resource.type): see the
    # guard form in deploy_grants.
    "tpudeployFirewall": (
        "A deployment's own firewall rules",
        (
            "compute.firewalls.create",
            "compute.firewalls.delete",
            "compute.firewalls.get",
            "compute.firewalls.update",
            "compute.networks.updatePolicy",
        ),
    ),
    # google_tpu_v2_vm (spot, on-demand) and the flex-start client
    # (tpudeploy.tpuvm.queued_resource).
    # No tpu.nodes.update: a pipeline deployment replaces its node instead (stacks/tpuvm/node.py),
    # because the TPU API cannot scope update to one node and a rewritten startup script runs as
    # that node's account.
    "tpudeployTpu": (
        "Create and delete TPU nodes and queued resources (the TPU API has no per-node IAM)",
        (
            "tpu.nodes.create",
            "tpu.nodes.delete",
            "tpu.nodes.get",
            "tpu.queuedResources.create",
            "tpu.queuedResources.delete",
            "tpu.queuedResources.get",
        ),
    ),
    # google_cloud_scheduler_job: the deadline job of a spot or on-demand node. enable: the
    # provider resumes a job someone paused (the stack declares paused = false).
    "tpudeployScheduler": (
        "A deployment's deadline job (Cloud Scheduler has no IAM conditions)",
        (
            "cloudscheduler.jobs.create",
            "cloudscheduler.jobs.delete",
            "cloudscheduler.jobs.enable",
            "cloudscheduler.jobs.get",
            "cloudscheduler.jobs.update",
        ),
    ),
    # The deadline job's own identity (<name>-stop), granted to that account only.
    "tpudeployNodeStop": ("Delete TPU nodes: the deadline jobs' identity", STOP_PERMISSIONS),
    # Terraform and the flex-start client poll the operations they start. Read-only.
    "tpudeployOperations": (
        "Poll Compute and TPU operations",
        ("compute.globalOperations.get", "tpu.operations.get"),
    ),
    # What the plan identity's predefined viewer roles leave out and a refresh reads: the
    # compile-cache bucket and its IAM policy.
    "tpudeployPlanner": (
        "Buckets and bucket IAM policies a Terraform refresh reads",
        ("storage.buckets.get", "storage.buckets.getIamPolicy"),
    ),
}

# Permissions that let a holder grant itself more, destroy, or become another identity. The tests
# refuse any of these in an unconditioned project-level grant, except in UNSCOPABLE_ROLES.
DANGEROUS_SUFFIXES = (".setIamPolicy", ".delete", ".actAs")
# Grants that cannot be narrowed below the project, with the reason (docs/gitops.md, residual
# risks).
UNSCOPABLE_ROLES = {
    "tpudeployTpu": (
        "Cloud TPU is not among the services that evaluate resource attributes in IAM Conditions "
        "and TPU nodes have no IAM policy of their own, so a deploy identity can create, read "
        "and delete any TPU node or queued resource in the project (never run one as another "
        "deployment's account: actAs is on its own node account only)"
    ),
    "tpudeployNodeStop": (
        "the same for the deadline job's account: it can delete any TPU node in the project; "
        "only Cloud Scheduler jobs whose creator may act as it obtain its token"
    ),
    "tpudeployScheduler": (
        "Cloud Scheduler is not among the services that evaluate resource attributes in IAM "
        "Conditions and jobs have no IAM policy of their own, so a deploy identity can change or "
        "delete any Cloud Scheduler job in the project (another deployment's deadline job "
        "included); a job it creates can only act as accounts it holds actAs on"
    ),
}
# The services each unscopable role may touch, nothing else
# (tests/gitops/test_gitops_identities.py).
UNSCOPABLE_SERVICES = {
    "tpudeployTpu": "tpu.",
    "tpudeployNodeStop": "tpu.",
    "tpudeployScheduler": "cloudscheduler.",
}


@dataclass(frozen=True)
class Condition:
    title: str
    expression: str
    description: str


@dataclass(frozen=True)
class Grant:
    identity: str  # "deploy:<deployment name>" or "plan"
    role: str  # "roles/..." or a key of CUSTOM_ROLES
    scope: str  # PROJECT, STATE_BUCKET, NODE_ACCOUNT, ...
    reason: str
    condition: Condition | None = None

    @property
    def custom(self) -> bool:
        return not self.role.startswith("roles/")

    def permissions(self) -> tuple[str, ...]:
        return CUSTOM_ROLES[self.role][1] if self.custom else ()


def cel_string(text: str) -> str:
    """A CEL string literal. Every value quoted here is validated (letters, digits and '-_./:@'),
    so a quote can never appear; refuse one anyway rather than emit a broken expression."""
    if "'" in text or "\\" in text:
        raise ValueError(f"cannot quote {text!r} in a CEL expression")
    return f"'{text}'"


def cel_list(items: Sequence[str]) -> str:
    return "[" + ", ".join(cel_string(i) for i in items) + "]"


def _one_of(names: Sequence[str]) -> str:
    return f"resource.name in {cel_list(names)}"


# ---- resource names, in the form IAM Conditions see them (conditions-resource-attributes) ----


def secret_names(dep: DeployConfig, project_number: str) -> tuple[str, ...]:
    """Secret Manager names secrets by project NUMBER in IAM conditions."""
    return tuple(
        f"projects/{project_number}/secrets/{sid}"
        for sid in (dep.hf_token_secret_id, dep.api_key_secret_id)
    )


def cache_bucket_name(dep: DeployConfig, project: str) -> str:
    return f"projects/_/buckets/{dep.compile_cache_bucket(project)}"


def state_bucket_name(bucket: str) -> str:
    return f"projects/_/buckets/{bucket}"


def state_objects_prefix(dep: DeployConfig, bucket: str) -> str:
    """Every object the GCS backend writes for this deployment (stacks/common.py state_prefix).
    The trailing slash keeps deployment `gemma4` out of `gemma4-staging`'s objects."""
    return f"{state_bucket_name(bucket)}/objects/{STATE_PREFIX_ROOT}/{dep.name}/"


def firewall_names(dep: DeployConfig, project: str) -> tuple[str, ...]:
    return tuple(
        f"projects/{project}/global/firewalls/{name}" for name in dep.firewall_rule_names.values()
    )


FIREWALL_TYPE = "compute.googleapis.com/Firewall"


# ---- the grants ----


def deploy_grants(
    dep: DeployConfig, *, project: str, project_number: str, state_bucket: str
) -> list[Grant]:
    """Everything deployment `dep`'s deploy identity holds; each condition names only its own
    resources. `project_number` may be a Terraform expression (the bootstrap reads it)."""
    who = f"deploy:{dep.name}"
    state_prefix = state_objects_prefix(dep, state_bucket)
    return [
        Grant(
            who,
            "roles/iam.workloadIdentityUser",
            DEPLOY_ACCOUNT,
            "GitHub Actions jobs of this deployment's environment, on main, from deploy.yml, "
            "destroy.yml or recover.yml, may act as this account (the provider's "
            "attribute.deploy_environment)",
        ),
        Grant(
            who,
            "roles/iam.serviceAccountUser",
            NODE_ACCOUNT,
            "actAs on this deployment's node account only, to attach it to the TPU VM",
        ),
        Grant(
            who,
            "tpudeployState",
            STATE_BUCKET,
            "read, write and lock its own Terraform state; list the bucket (names only)",
            Condition(
                f"{dep.name} state",
                f"resource.name == {cel_string(state_bucket_name(state_bucket))} || "
                f"resource.name.startsWith({cel_string(state_prefix)})",
                "objects under this deployment's prefix; the bucket itself for list",
            ),
        ),
        Grant(
            who,
            "tpudeploySecrets",
            PROJECT,
            "grant its node account access to its two secrets (the bootstrap creates them)",
            Condition(
                f"{dep.name} secrets",
                f"resource.type == 'secretmanager.googleapis.com/Secret' && "
                f"{_one_of(secret_names(dep, project_number))}",
                "this deployment's HF-token and API-key secrets only",
            ),
        ),
        Grant(
            who,
            "tpudeployCacheBucket",
            PROJECT,
            "grant its node account object access to its compile-cache bucket (the bootstrap "
            "creates it)",
            Condition(
                f"{dep.name} cache bucket",
                f"resource.type == 'storage.googleapis.com/Bucket' && "
                f"resource.name == {cel_string(cache_bucket_name(dep, project))}",
                "this deployment's compile-cache bucket only",
            ),
        ),
        Grant(
            who,
            "tpudeployFirewall",
            PROJECT,
            "its firewall rules (deny-all, API port, IAP SSH), and updatePolicy on their network",
            Condition(
                f"{dep.name} firewall",
                # The documented guard form (conditions-attribute-reference, "support for
                # inherited conditions": scope a condition by resource.type so that a resource
                # lacking an attribute is judged by the part it provides). A network provides
                # resource.type but not resource.name, so the old `|| resource.name == network`
                # branch never granted updatePolicy; here every non-firewall resource the role
                # reaches (networks, for updatePolicy alone) passes the guard, and firewalls only
                # by their exact names.
                f"resource.type != {cel_string(FIREWALL_TYPE)} || "
                f"{_one_of(firewall_names(dep, project))}",
                "this deployment's firewall rules; updatePolicy on any network (alone it changes "
                "nothing: every rule change also needs the firewall permission)",
            ),
        ),
        Grant(
            who,
            "tpudeployTpu",
            PROJECT,
            "create and delete its TPU VM or flex-start queued resource; not scoped (see "
            "residual risks)",
        ),
        Grant(who, "tpudeployOperations", PROJECT, "poll the operations it starts (read-only)"),
        Grant(
            who,
            "roles/iam.serviceAccountUser",
            STOP_ACCOUNT,
            "actAs on this deployment's deadline-job account only, to attach it to the job",
        ),
        Grant(
            who,
            "tpudeployScheduler",
            PROJECT,
            "create, update and delete its deadline job (spot, on-demand); not scoped (see "
            "residual risks)",
        ),
    ]


def stop_grants(dep: DeployConfig) -> list[Grant]:
    """The deadline job's account (<name>-stop): the TPU API's nodes.delete and nothing else."""
    return [
        Grant(
            f"stop:{dep.name}",
            "tpudeployNodeStop",
            PROJECT,
            "the deadline job deletes the spot or on-demand node when its max_run_duration is "
            "over; not scoped (see residual risks)",
        )
    ]


PLAN_PROJECT_ROLES = (
    ("roles/tpu.viewer", "refresh TPU nodes"),
    ("roles/compute.networkViewer", "refresh firewall rules"),
    ("roles/secretmanager.viewer", "refresh secret metadata and IAM (never a version's payload)"),
    ("roles/cloudscheduler.viewer", "refresh deadline jobs; the recover workflow reads them"),
)


def plan_grants() -> list[Grant]:
    """The read-only identity of pull-request plans and the drift check. Never roles/viewer, a
    basic role that reads every service in the project."""
    grants = [
        Grant(
            "plan",
            "roles/iam.workloadIdentityUser",
            PLAN_ACCOUNT,
            "pull-request jobs and jobs on main (drift), by exact token subject",
        ),
        Grant(
            "plan",
            "roles/storage.objectViewer",
            STATE_BUCKET,
            "read every deployment's state; plans run with -lock=false, so no lock object",
        ),
    ]
    grants += [Grant("plan", role, PROJECT, why) for role, why in PLAN_PROJECT_ROLES]
    grants.append(
        Grant("plan", "tpudeployPlanner", PROJECT, "refresh the compile-cache bucket and its IAM")
    )
    return grants


def dangerous(permissions: Sequence[str]) -> list[str]:
    return [p for p in permissions if p.endswith(DANGEROUS_SUFFIXES)]


def grant_table(project_number_hint: str = "PROJECT_NUMBER") -> str:
    """Markdown: every grant of the plan identity and of a deploy identity (for deployment `NAME`),
    with scope, condition and reason. Generated into docs/gitops.md by tools/readme.py."""
    from tpudeploy.config import parse_config

    sample = parse_config({"name": "name-x"})
    rows = ["| identity | role | where | condition | why |", "|---|---|---|---|---|"]
    grants = deploy_grants(
        sample, project="PROJECT", project_number=project_number_hint, state_bucket="STATE"
    )
    for g in [*grants, *stop_grants(sample), *plan_grants()]:
        role = f"`{g.role}`" + (f" ({', '.join(g.permissions())})" if g.custom else "")
        cond = (
            f"`{g.condition.expression.replace('name-x', 'NAME').replace('|', '&#124;')}`"
            if g.condition
            else ("**none: not scopable**" if g.role in UNSCOPABLE_ROLES else "-")
        )
        who = {"deploy": "deploy (`NAME-apply`)", "stop": "deadline job (`NAME-stop`)"}.get(
            g.identity.partition(":")[0], "plan"
        )
        rows.append(f"| {who} | {role} | {g.scope} | {cond} | {g.reason} |")
    return "\n".join(rows)
