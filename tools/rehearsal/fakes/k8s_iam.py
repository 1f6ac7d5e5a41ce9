"""How GKE authorizes a Kubernetes API request, as data with sources: the IAM permission of each
(group, resource, verb) is tpudeploy/gke/kube_iam.py's table, checked on the cluster the request
is sent to (iamrules.gke_cluster: the project's policy reaches it and a condition sees the
cluster's name). The Kubernetes fake (tools/rehearsal/fakes/k8s.py) asks `refusal` before it
serves a request; the owner passes everything, as in every fake.

What is judged, rule by rule:

- Non-resource paths are open to every authenticated caller: Kubernetes' default ClusterRoles
  "system:discovery" ("Allows read-only access to API discovery endpoints needed to discover
  and negotiate an API level") and "system:public-info-viewer" ("Allows read-only access to
  non-sensitive information about the cluster"), both bound to the system:authenticated group
  (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#default-roles-and-role-bindings).
- A resource request needs kube_iam.permission(group, plural, verb, custom=...): custom for a
  kind no built-in API group serves (a CRD's), which GKE's IAM covers with
  container.thirdPartyObjects.*. A request the table returns None for is refused 403 Forbidden,
  in the API server's words.
- RBAC's escalation guard (same page, "Privilege escalation prevention and bootstrapping"): "You
  can only create/update a role binding if you already have all the permissions contained in
  the referenced role ... *or* if you have been authorized to perform the `bind` verb on the
  referenced role", and "You can only create/update a role if ... You already have all the
  permissions contained in the role ... [or] You are granted explicit permission to perform the
  `escalate` verb on the `roles` or `clusterroles` resource". The fake does not compute a
  caller's effective rules, so it always asks for the explicit verb
  (container.<roles|clusterRoles>.bind / .escalate): stricter than the real server, never
  looser.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from tools.rehearsal.fakes.base import Answer
from tools.rehearsal.fakes.iamrules import Checked
from tools.rehearsal.fakes.inventory import OWNER, Inventory
from tpudeploy.gke import kube_iam

# The API groups a Kubernetes API server serves itself (https://kubernetes.io/docs/reference/
# kubernetes-api/group-versions/, "The API Groups and their versions are summarized in the
# following table", read through the stored copy); any other group is a CustomResource-
# Definition's (gateway.networking.k8s.io, inference.networking.k8s.io, cloud.google.com,
# monitoring.googleapis.com, secrets-store.csi.x-k8s.io, ...), however its name ends.
BUILT_IN_GROUPS = frozenset(
    {
        "",  # core
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "autoscaling",
        "batch",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "internal.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "storagemigration.k8s.io",
    }
)
# Discovery and public information (system:discovery, system:public-info-viewer).
OPEN_PATHS = re.compile(r"/version/?|/api(/[^/]+)?/?|/apis(/[^/]+){0,2}/?|/openapi/.*")
RBAC_GROUP = "rbac.authorization.k8s.io"
BINDINGS = frozenset({"rolebindings", "clusterrolebindings"})
ROLES = frozenset({"roles", "clusterroles"})


def verb(method: str, name: str | None) -> str:
    """The Kubernetes verb of a request (kubernetes.io/docs/reference/access-authn-authz/
    authorization, "Determine the request verb"): GET of one object get, of a collection list;
    POST create; PUT update; PATCH patch; DELETE delete."""
    if method == "GET":
        return "get" if name else "list"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower()
    )


def custom(group: str) -> bool:
    return group not in BUILT_IN_GROUPS


def _user(principal: str) -> str:
    """GKE names a Google identity by its email in Kubernetes (serviceAccount:x@y -> x@y)."""
    return principal.partition(":")[2] or principal


def forbidden(
    principal: str, group: str, plural: str, verb_: str, ns: str | None, name: str | None
) -> Answer:
    """The API server's 403 (apimachinery's NewForbidden: `<resource>[.<group>] ["<name>"] is
    forbidden: User "<user>" cannot <verb> resource "<resource>" in API group "<group>" in the
    namespace "<ns>"`, or `at the cluster scope`)."""
    qualified = f"{plural}.{group}" if group else plural
    target = f'{qualified} "{name}"' if name else qualified
    scope = f'in the namespace "{ns}"' if ns else "at the cluster scope"
    message = (
        f'{target} is forbidden: User "{_user(principal)}" cannot {verb_} resource "{plural}" '
        f'in API group "{group}" {scope}'
    )
    return 403, {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Forbidden",
        "details": {"name": name or "", "group": group, "kind": plural},
        "code": 403,
    }


def _escalation(group: str, plural: str, verb_: str, body: Any) -> str | None:
    """The extra permission RBAC's escalation guard asks of a role or binding write."""
    if group != RBAC_GROUP or verb_ not in ("create", "update", "patch"):
        return None
    if plural in ROLES:
        return f"container.{kube_iam.BY_PLURAL[(group, plural)].iam}.escalate"
    if plural in BINDINGS:
        kind = str(((body if isinstance(body, dict) else {}).get("roleRef") or {}).get("kind"))
        return f"container.{kube_iam.ROLE_KINDS.get(kind, 'clusterRoles')}.bind"
    return None


def refusal(
    inventory: Inventory,
    principal: str,
    cluster: Checked,
    request: tuple[str, str, str, str | None, str | None],
    body: Any,
    at: datetime | None = None,
) -> Answer | None:
    """None when IAM admits `request` (method, group, plural, namespace, name) on `cluster`,
    else the API server's 403."""
    if principal == OWNER:
        return None  # the person running the rehearsal: a project owner is a cluster admin
    method, group, plural, ns, name = request
    verb_ = verb(method, name)
    permission = kube_iam.permission(group, plural, verb_, custom=custom(group))
    if permission is None or not inventory.check(principal, permission, cluster, at):
        return forbidden(principal, group, plural, verb_, ns, name)
    extra = _escalation(group, plural, verb_, body)
    if extra is not None and not inventory.check(principal, extra, cluster, at):
        qualified = f"{plural}.{group}"
        object_name = name or str(((body or {}).get("metadata") or {}).get("name", ""))
        return 403, {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": (
                f'{qualified} "{object_name}" is forbidden: user "{_user(principal)}" is '
                f"attempting to grant RBAC permissions not currently held (the fake asks for "
                f"{extra}: tools/rehearsal/fakes/k8s_iam.py)"
            ),
            "reason": "Forbidden",
            "details": {"name": object_name, "group": group, "kind": plural},
            "code": 403,
        }
    return None
