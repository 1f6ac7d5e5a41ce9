"""An IAM grant as data: who, which role, where, under which condition, why.

The GitOps identities (tpudeploy/identities.py) are made of these: the grants both platforms
share are there, each platform's own in its package (tpudeploy/tpuvm/pipeline.py,
tpudeploy/gke/pipeline.py), and stacks/bootstrap.py, the rehearsal's bootstrap and
docs/gitops.md's table all read the same list. Plain data: no cdktf, no platform (the shared
layer: both platform packages build on it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from tpudeploy.config import DeployConfig

# Where a grant is attached. A project-level grant reaches every resource of its kind in the
# project unless a condition narrows it; the others are attached to one resource.
PROJECT = "project"
STATE_BUCKET = "state bucket"
NODE_ACCOUNT = "node service account"
DEPLOY_ACCOUNT = "deploy service account"
PLAN_ACCOUNT = "plan service account"
STOP_ACCOUNT = "stop service account"


@dataclass(frozen=True)
class Condition:
    title: str
    expression: str
    description: str


@dataclass(frozen=True)
class Grant:
    identity: str  # "deploy:<deployment name>", "stop:<deployment name>" or "plan"
    role: str  # "roles/..." or a custom role's key (tpudeploy.identities.CUSTOM_ROLES)
    scope: str  # PROJECT, STATE_BUCKET, NODE_ACCOUNT, ...
    reason: str
    condition: Condition | None = None

    @property
    def custom(self) -> bool:
        return not self.role.startswith("roles/")


@dataclass(frozen=True)
class Unscopable:
    """A custom role that cannot be narrowed below the project: the one service its
    permissions may name, and why nothing narrower exists (docs/gitops.md, residual risks)."""

    service: str  # e.g. "tpu." : every permission of the role starts with it
    reason: str


@dataclass(frozen=True)
class ProjectMember:
    """A project-level role the GitOps bootstrap grants once, as the owner, because granting it
    needs resourcemanager.projects.setIamPolicy, which no condition can narrow to one member:
    the deploy identity holding it could grant itself any role."""

    role: str
    member: str
    reason: str


class PipelinePart(Protocol):
    """A platform's part of the GitOps identities (tpudeploy/tpuvm/pipeline.py,
    tpudeploy/gke/pipeline.py): its custom roles (key: description and permissions), those no
    condition can narrow below the project, what its deploy identity holds for the platform's own
    resources, its deadline job's one grant, and the project roles only the bootstrap may grant
    (they take setIamPolicy on the project)."""

    @property
    def ROLES(self) -> Mapping[str, tuple[str, tuple[str, ...]]]: ...

    @property
    def UNSCOPABLE(self) -> Mapping[str, Unscopable]: ...

    def grants(self, dep: DeployConfig, *, project: str) -> list[Grant]: ...

    def stop_grant(self, dep: DeployConfig) -> Grant: ...

    def project_members(
        self, dep: DeployConfig, *, project: str, project_number: str
    ) -> list[ProjectMember]: ...


def cel_string(text: str) -> str:
    """A CEL string literal. Every value quoted here is validated (letters, digits and '-_./:@'),
    so a quote can never appear; refuse one anyway rather than emit a broken expression."""
    if "'" in text or "\\" in text or '"' in text:
        raise ValueError(f"cannot quote {text!r} in a CEL expression")
    return f"'{text}'"


def cel_list(items: Sequence[str]) -> str:
    return "[" + ", ".join(cel_string(i) for i in items) + "]"


def one_of(names: Sequence[str]) -> str:
    return f"resource.name in {cel_list(names)}"
