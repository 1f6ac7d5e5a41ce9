"""Which GKE IAM permission admits a Kubernetes API request, for the objects the serving stack
declares: one table for the pipeline's deploy identity (tpudeploy/identities.py grants exactly
these) and for the rehearsal's Kubernetes fake (tools/rehearsal/fakes/k8s_iam.py refuses a
request the table does not admit).

GKE authorizes a Kubernetes API request with IAM as well as RBAC: each resource of the API has
IAM permissions named `container.<resource>.<verb>` (cloud.google.com/iam/docs/roles-permissions/
container: container.deployments.create, container.configMaps.get, ...), and "custom resources"
(instances of a CustomResourceDefinition: the ComputeClass, PodMonitoring, SecretProviderClass,
the Gateway API's and the inference extension's kinds) share `container.thirdPartyObjects.*`.
Kubernetes' own verbs map onto IAM's: get/list/create/update/delete, `patch` as update, `watch`
as list. RBAC's escalation guard (kubernetes.io/docs/reference/access-authn-authz/rbac,
"Privilege escalation prevention and bootstrapping"): a role binding is created only by whoever
may `bind` the role it names, and a role whose rules the creator does not hold needs `escalate`;
GKE's IAM names those container.roles.bind / container.clusterRoles.bind and ...escalate.

Only the cluster's own deployment holds these, through a grant conditioned on its cluster's name
(tpudeploy/identities.py); a request for a resource not in this table is one the serving stack
never makes, and the fake answers it 403.
"""

from __future__ import annotations

from dataclasses import dataclass

# Kubernetes verbs (the HTTP method and whether a name is given) onto IAM's verb.
VERBS = {
    "get": "get",
    "list": "list",
    "watch": "list",
    "create": "create",
    "update": "update",
    "patch": "update",
    "delete": "delete",
}
IAM_VERBS = ("create", "delete", "get", "list", "update")
CUSTOM_RESOURCE = "thirdPartyObjects"


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core API
    plural: str  # as in the REST path
    iam: str  # the <resource> of container.<resource>.<verb>
    kind: str


# Every built-in kind the serving stack (and the custom metrics adapter it installs) declares.
BUILT_IN: tuple[Resource, ...] = (
    Resource("", "namespaces", "namespaces", "Namespace"),
    Resource("", "serviceaccounts", "serviceAccounts", "ServiceAccount"),
    Resource("", "configmaps", "configMaps", "ConfigMap"),
    Resource("", "services", "services", "Service"),
    Resource("apps", "deployments", "deployments", "Deployment"),
    Resource("policy", "poddisruptionbudgets", "podDisruptionBudgets", "PodDisruptionBudget"),
    Resource(
        "autoscaling",
        "horizontalpodautoscalers",
        "horizontalPodAutoscalers",
        "HorizontalPodAutoscaler",
    ),
    Resource("networking.k8s.io", "networkpolicies", "networkPolicies", "NetworkPolicy"),
    Resource("apiregistration.k8s.io", "apiservices", "apiServices", "APIService"),
    Resource("rbac.authorization.k8s.io", "clusterroles", "clusterRoles", "ClusterRole"),
    Resource(
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        "clusterRoleBindings",
        "ClusterRoleBinding",
    ),
    Resource("rbac.authorization.k8s.io", "roles", "roles", "Role"),
    Resource("rbac.authorization.k8s.io", "rolebindings", "roleBindings", "RoleBinding"),
)
BY_PLURAL = {(r.group, r.plural): r for r in BUILT_IN}
# The role kinds a binding names, with the IAM resource whose `bind` it needs.
ROLE_KINDS = {"ClusterRole": "clusterRoles", "Role": "roles"}


def permission(group: str, plural: str, verb: str, *, custom: bool) -> str | None:
    """The IAM permission of one request, or None when the serving stack never makes it."""
    iam_verb = VERBS.get(verb)
    if iam_verb is None:
        return None
    if custom:
        return f"container.{CUSTOM_RESOURCE}.{iam_verb}"
    resource = BY_PLURAL.get((group, plural))
    return f"container.{resource.iam}.{iam_verb}" if resource else None


def _on_every_kind(verbs: tuple[str, ...]) -> set[str]:
    """`verbs` on every kind above and on custom resources."""
    resources = [*(r.iam for r in BUILT_IN), CUSTOM_RESOURCE]
    return {f"container.{r}.{v}" for r in resources for v in verbs}


def deploy_permissions() -> tuple[str, ...]:
    """What the deploy identity needs inside its own cluster: every verb on the kinds above and
    on custom resources, and RBAC's bind and escalate for the adapter's roles and bindings."""
    names = _on_every_kind(IAM_VERBS)
    names |= {
        f"container.{iam}.{extra}" for iam in ROLE_KINDS.values() for extra in ("bind", "escalate")
    }
    return tuple(sorted(names))


def plan_permissions() -> tuple[str, ...]:
    """What the read-only plan identity needs to refresh the serving stack: get and list of the
    same kinds, nothing else (no Secret, no Pod, no verb that writes)."""
    return tuple(sorted(_on_every_kind(("get", "list"))))
