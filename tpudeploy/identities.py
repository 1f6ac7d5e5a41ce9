"""The GitOps identities as data: each CI identity's roles, where, under which condition, why.

stacks/bootstrap.py turns these into IAM resources, tools/readme.py into docs/gitops.md's grant
table, and the tests evaluate every condition with a CEL interpreter: one definition for all three.
Conditions name a deployment's resources exactly (never by a name prefix: deployment `gemma4`
must not reach `gemma4-staging`'s secrets), and the names come from tpudeploy.config.DeployConfig.
"""

from __future__ import annotations

from collections.abc import Sequence

from tpudeploy import facts
from tpudeploy.config import DeployConfig
from tpudeploy.gitops import STATE_PREFIX_ROOT
from tpudeploy.grants import (
    DEPLOY_ACCOUNT,
    NODE_ACCOUNT,
    PLAN_ACCOUNT,
    PROJECT,
    STATE_BUCKET,
    STOP_ACCOUNT,
    Condition,
    Grant,
    ProjectMember,
    Unscopable,
    cel_string,
    one_of,
)
from tpudeploy.platform import PLATFORMS, platform_for

__all__ = [
    "DEPLOY_ACCOUNT",
    "NODE_ACCOUNT",
    "PLAN_ACCOUNT",
    "PROJECT",
    "STATE_BUCKET",
    "STOP_ACCOUNT",
    "Condition",
    "Grant",
    "ProjectMember",
]

# Each platform's own roles and grants are its package's (Platform.pipeline:
# tpudeploy/tpuvm/pipeline.py, tpudeploy/gke/pipeline.py, with the documented
# rules); what both share is here.

# Custom roles (project-level definitions, granted per deployment with a condition). Predefined
# roles that would do (secretmanager.admin, storage.admin, compute.securityAdmin, tpu.admin) also
# hold version access, object access, other resource types or setIamPolicy on the project.
SHARED_ROLES: dict[str, tuple[str, tuple[str, ...]]] = {
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
    # What the plan identity's predefined viewer roles leave out and a refresh reads: the
    # compile-cache bucket and its IAM policy; the project (a GKE cluster stack reads its number
    # with the google_project data source: projects.get).
    "tpudeployPlanner": (
        "Buckets, bucket IAM policies and the project a Terraform refresh reads",
        ("resourcemanager.projects.get", "storage.buckets.get", "storage.buckets.getIamPolicy"),
    ),
}

# Every custom role the bootstrap defines in the project: the shared ones and each platform's
# (a key is one role in the project: the tests hold the keys apart).
CUSTOM_ROLES: dict[str, tuple[str, tuple[str, ...]]] = {
    **SHARED_ROLES,
    **{k: v for p in PLATFORMS.values() for k, v in p.pipeline.ROLES.items()},
}

# Permissions that let a holder grant itself more, destroy, or become another identity. The tests
# refuse any of these in an unconditioned project-level grant, except in UNSCOPABLE_ROLES.
DANGEROUS_SUFFIXES = (".setIamPolicy", ".delete", ".actAs")
_SHARED_UNSCOPABLE = {
    "tpudeployScheduler": Unscopable(
        "cloudscheduler.",
        "Cloud Scheduler is not among the services that evaluate resource attributes in IAM "
        "Conditions and jobs have no IAM policy of their own, so a deploy identity can change or "
        "delete any Cloud Scheduler job in the project (another deployment's deadline job "
        "included); a job it creates can only act as accounts it holds actAs on",
    ),
}
_UNSCOPABLE = {
    **_SHARED_UNSCOPABLE,
    **{k: v for p in PLATFORMS.values() for k, v in p.pipeline.UNSCOPABLE.items()},
}
# Grants that cannot be narrowed below the project, with the reason (docs/gitops.md, residual
# risks), and the one service each may touch (tests/gitops/test_gitops_identities.py).
UNSCOPABLE_ROLES = {k: u.reason for k, u in _UNSCOPABLE.items()}
UNSCOPABLE_SERVICES = {k: u.service for k, u in _UNSCOPABLE.items()}


def permissions(grant: Grant) -> tuple[str, ...]:
    """A custom role's permissions (a predefined role's are Google's: none listed here)."""
    return CUSTOM_ROLES[grant.role][1] if grant.custom else ()


# ---- resource names, in the form IAM Conditions see them (conditions-resource-attributes) ----


def secret_names(dep: DeployConfig, project_number: str) -> tuple[str, ...]:
    """Every secret the deployment's replicas read (Platform.secrets: the token and the API key;
    GKE's front-door certificate too). Secret Manager names secrets by project NUMBER in IAM
    conditions."""
    return tuple(
        f"projects/{project_number}/secrets/{sid}" for sid, _ in platform_for(dep).secrets(dep)
    )


def cache_bucket_name(dep: DeployConfig, project: str) -> str:
    return f"projects/_/buckets/{dep.compile_cache_bucket(project)}"


def state_bucket_name(bucket: str) -> str:
    return f"projects/_/buckets/{bucket}"


def state_objects_prefix(dep: DeployConfig, bucket: str) -> str:
    """Every object the GCS backend writes for this deployment (stacks/common.py state_prefix).
    The trailing slash keeps deployment `gemma4` out of `gemma4-staging`'s objects."""
    return f"{state_bucket_name(bucket)}/objects/{STATE_PREFIX_ROOT}/{dep.name}/"


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
            "actAs on this deployment's node account only, to attach it to the TPU VM (GKE: to "
            "its node pools)",
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
            "grant its node account (GKE: its pods' identity) access to its secrets (the "
            "bootstrap creates them)",
            Condition(
                f"{dep.name} secrets",
                f"resource.type == 'secretmanager.googleapis.com/Secret' && "
                f"{one_of(secret_names(dep, project_number))}",
                "this deployment's own secrets only (HF token, each client's API key, TLS key)",
            ),
        ),
        Grant(
            who,
            "tpudeployCacheBucket",
            PROJECT,
            "grant its node account (GKE: its pods' identity) object access to its "
            "compile-cache bucket (the bootstrap creates it)",
            Condition(
                f"{dep.name} cache bucket",
                f"resource.type == 'storage.googleapis.com/Bucket' && "
                f"resource.name == {cel_string(cache_bucket_name(dep, project))}",
                "this deployment's compile-cache bucket only",
            ),
        ),
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
            "create, update and delete its deadline job (spot, on-demand; GKE: the cluster's); "
            "not scoped (see residual risks)",
        ),
        *platform_for(dep).pipeline.grants(dep, project=project),
    ]


def watch_grants(
    watch: DeployConfig, *, project: str, project_number: str, state_bucket: str
) -> list[Grant]:
    """The upstream watch's identity (`<name>-watch-apply`): a deploy identity of its own
    flex-start deployment `<name>-watch` (deploy and destroy it: node, firewall rules, its
    secrets' and cache's IAM, its state under its own prefix), obtained only by
    upstream-watch.yml's jobs, plus reading the watch node's own API key, which `make accept`'s
    rows send (accessSecretVersion needs secretmanager.versions.access on the secret:
    https://cloud.google.com/secret-manager/docs/access-control). The pin it reads is in the
    repository (the workflow's checkout): no cloud permission."""
    who = f"deploy:{watch.name}"
    grants = deploy_grants(
        watch, project=project, project_number=project_number, state_bucket=state_bucket
    )
    wif = grants[0]
    assert wif.role == "roles/iam.workloadIdentityUser" and wif.scope == DEPLOY_ACCOUNT
    grants[0] = Grant(
        who,
        wif.role,
        DEPLOY_ACCOUNT,
        "GitHub Actions jobs of the watch's environment, on main, from upstream-watch.yml "
        "only, may act as this account (the provider's attribute.watch_environment)",
    )
    key = f"projects/{project_number}/secrets/{watch.api_key_secret_id}"
    grants.append(
        Grant(
            who,
            "roles/secretmanager.secretAccessor",
            PROJECT,
            "read the watch node's own API key to run make accept's rows and the sweep "
            "against it (the key of no other deployment)",
            Condition(
                f"{watch.name} api key",
                "resource.type == 'secretmanager.googleapis.com/Secret' && "
                f"resource.name == {cel_string(key)}",
                "the watch deployment's API key secret only",
            ),
        )
    )
    return grants


def stop_grants(dep: DeployConfig) -> list[Grant]:
    """The deadline job's account (<name>-stop): its platform's delete and nothing else (the TPU
    VM's node; GKE's cluster, by its name)."""
    return [platform_for(dep).pipeline.stop_grant(dep)]


def project_members(dep: DeployConfig, *, project: str, project_number: str) -> list[ProjectMember]:
    """Project roles deployment `dep` needs that only the bootstrap may grant."""
    return platform_for(dep).pipeline.project_members(
        dep, project=project, project_number=project_number
    )


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
    # GKE deployments: the cluster, its pools and, inside every cluster, the serving stack's
    # kinds, read-only (tpudeploy/gke/pipeline.py PLAN_ROLE).
    grants.append(
        Grant(
            "plan",
            "tpudeployPlannerGke",
            PROJECT,
            "refresh GKE clusters, node pools and the serving stack's Kubernetes objects",
        )
    )
    grants.append(
        Grant(
            "plan",
            "tpudeployPlanner",
            PROJECT,
            "refresh the compile-cache bucket and its IAM, and the project's number (GKE)",
        )
    )
    return grants


def dangerous(names: Sequence[str]) -> list[str]:
    return [p for p in names if p.endswith(DANGEROUS_SUFFIXES)]


def grant_table(project_number_hint: str = "PROJECT_NUMBER") -> str:
    """Markdown: every grant of the plan identity and of a deploy identity (for deployment `NAME`,
    on each platform), with scope, condition and reason. Generated into docs/gitops.md by
    tools/readme.py."""
    from tpudeploy.config import parse_config

    rows = ["| identity | role | where | condition | why |", "|---|---|---|---|---|"]
    seen: set[tuple[str, str, str]] = set()
    samples = {
        "TPU VM": parse_config({"name": "name-x"}),
        "GKE": parse_config({"name": "name-x", "platform": "gke"}),
    }
    for label, sample in samples.items():
        grants = deploy_grants(
            sample, project="PROJECT", project_number=project_number_hint, state_bucket="STATE"
        )
        shared = len(grants) - len(platform_for(sample).pipeline.grants(sample, project="P"))
        for n, g in enumerate([*grants, *stop_grants(sample)]):
            key = (g.identity, g.role, g.scope)
            if key in seen:
                continue
            seen.add(key)
            own = n >= shared
            who = {"deploy": "deploy (`NAME-apply`)", "stop": "deadline job (`NAME-stop`)"}[
                g.identity.partition(":")[0]
            ]
            rows.append(_row(f"{who}{f', {label}' if own else ''}", g))
    rows += [_row("plan", g) for g in plan_grants()]
    return "\n".join(rows)


def _grouped(names: Sequence[str]) -> str:
    """container.clusters.get, container.clusters.update -> container.clusters.{get, update}:
    one entry per resource, so a role of seventy permissions still reads as a row."""
    by_resource: dict[str, list[str]] = {}
    for name in names:
        resource, _, verb = name.rpartition(".")
        by_resource.setdefault(resource, []).append(verb)
    return ", ".join(
        f"{r}.{verbs[0]}" if len(verbs) == 1 else f"{r}.{{{', '.join(verbs)}}}"
        for r, verbs in by_resource.items()
    )


def _row(who: str, g: Grant) -> str:
    role = f"`{g.role}`" + (f" ({_grouped(permissions(g))})" if g.custom else "")
    text = g.condition.expression if g.condition else ""
    text = text.replace("name-x", "NAME").replace(f"/locations/{facts.ZONE}/", "/locations/ZONE/")
    cond = (
        f"`{text.replace('|', '&#124;')}`"
        if g.condition
        else ("**none: not scopable**" if g.role in UNSCOPABLE_ROLES else "-")
    )
    return f"| {who} | {role} | {g.scope} | {cond} | {g.reason} |"
