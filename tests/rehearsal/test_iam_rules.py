"""The IAM fake refuses what Google refuses (issue 21): each permission is checked on the resource
Google checks it on, and a condition that reads an attribute that resource does not provide
never grants. Driven over HTTP against the loopback fakes, with a deploy identity's token."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tools.rehearsal.fakes import iamrules
from tools.rehearsal.fakes.compute import FakeCompute
from tools.rehearsal.fakes.inventory import Inventory
from tools.rehearsal.fakes.secretmanager import FakeSecretManager
from tools.rehearsal.fakes.tpu import FakeTpuApi
from tpudeploy import identities
from tpudeploy.config import parse_config

P = "proj-1"
DEPLOY = f"serviceAccount:gemma4-x-apply@{P}.iam.gserviceaccount.com"
DEP = parse_config({"name": "gemma4-x", "project": P})
# The conditions d90ced4's bootstrap granted (tpudeploy/identities.py then), verbatim in shape.
OLD_SECRETS = (
    "resource.type == 'secretmanager.googleapis.com/Secret' && resource.name in "
    f"['projects/{iamrules.PROJECT_NUMBER}/secrets/gemma4-x-hf-token']"
)
OLD_FIREWALL = (
    f"resource.name in ['projects/{P}/global/firewalls/gemma4-x-deny-all'] || "
    f"resource.name == 'projects/{P}/global/networks/default'"
)


def call(host: str, method: str, path: str, token: str | None, body: Any = None) -> int:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://{host}{path}", data=data, method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (loopback)
            return int(response.status)
    except urllib.error.HTTPError as exc:
        call.last_error = json.loads(exc.read())["error"]["message"]  # type: ignore[attr-defined]
        return exc.code


@pytest.fixture
def inv() -> Inventory:
    inventory = Inventory()
    for service in ("secretmanager.googleapis.com", "compute.googleapis.com", "tpu.googleapis.com"):
        inventory.enable(P, service)
    return inventory


def grant(inv: Inventory, role: str, permissions: tuple[str, ...], condition: str | None) -> str:
    """A custom role holding `permissions`, granted on the project to the deploy identity."""
    name = f"projects/{P}/roles/{role}"
    inv.put("iam", name, {"name": name, "includedPermissions": list(permissions)})
    binding: dict[str, Any] = {"role": name, "members": [DEPLOY]}
    if condition is not None:
        binding["condition"] = {"title": role, "expression": condition}
    inv.policy("cloudresourcemanager", f"projects/{P}").append(binding)
    return inv.mint_token(DEPLOY)


@pytest.fixture
def secretmanager(inv: Inventory) -> Iterator[FakeSecretManager]:
    with FakeSecretManager(inv) as fake:
        yield fake


@pytest.fixture
def compute(inv: Inventory) -> Iterator[FakeCompute]:
    with FakeCompute(inv) as fake:
        yield fake


def _create_secret(fake: FakeSecretManager, token: str | None, secret_id: str) -> int:
    return call(
        fake.host,
        "POST",
        f"/v1/projects/{P}/secrets?secretId={secret_id}",
        token,
        {"replication": {"automatic": {}}},
    )


def test_secrets_create_is_checked_on_the_project(
    inv: Inventory, secretmanager: FakeSecretManager
) -> None:
    """Defect 1: d90ced4's grant names the secret, but create is checked on the parent project,
    which is no Secret: 403. The owner, or a grant the project satisfies, creates it."""
    token = grant(inv, "old", ("secretmanager.secrets.create",), OLD_SECRETS)
    assert _create_secret(secretmanager, token, "gemma4-x-hf-token") == 403
    assert call.last_error.startswith(  # type: ignore[attr-defined]
        f"Permission 'secretmanager.secrets.create' denied on resource 'projects/{P}'"
    )
    assert _create_secret(secretmanager, None, "gemma4-x-hf-token") == 200  # the owner
    project_wide = grant(inv, "any", ("secretmanager.secrets.create",), None)
    assert _create_secret(secretmanager, project_wide, "gemma4-x-api-key") == 200


def test_a_secret_condition_grants_on_the_secret_itself(
    inv: Inventory, secretmanager: FakeSecretManager
) -> None:
    """What the deploy identity keeps: IAM on its own two secrets, by their numbered names."""
    (secrets,) = [
        g
        for g in identities.deploy_grants(
            DEP, project=P, project_number=iamrules.PROJECT_NUMBER, state_bucket="b-1"
        )
        if g.role == "tpudeploySecrets"
    ]
    assert secrets.condition is not None
    token = grant(
        inv, "tpudeploySecrets", identities.permissions(secrets), secrets.condition.expression
    )
    for secret_id in ("gemma4-x-hf-token", "payroll-password"):
        assert _create_secret(secretmanager, None, secret_id) == 200
    path = f"/v1/projects/{P}/secrets/gemma4-x-hf-token:getIamPolicy"
    assert call(secretmanager.host, "POST", path, token, {}) == 200
    other = f"/v1/projects/{P}/secrets/payroll-password:getIamPolicy"
    assert call(secretmanager.host, "POST", other, token, {}) == 403


def _insert_rule(fake: FakeCompute, token: str, name: str) -> int:
    return call(
        fake.host,
        "POST",
        f"/compute/v1/projects/{P}/global/firewalls",
        token,
        {"name": name, "network": "global/networks/default", "denied": [{"IPProtocol": "all"}]},
    )


def test_a_firewall_change_needs_updatepolicy_on_the_network(
    inv: Inventory, compute: FakeCompute
) -> None:
    """Defect 2: a network provides no resource.name, so d90ced4's `|| resource.name == network`
    never granted updatePolicy: 403 on the network. The guard form grants it."""
    permissions = identities.CUSTOM_ROLES["tpudeployFirewall"][1]
    token = grant(inv, "old", permissions, OLD_FIREWALL)
    assert _insert_rule(compute, token, "gemma4-x-deny-all") == 403
    assert call.last_error.startswith(  # type: ignore[attr-defined]
        "Permission 'compute.networks.updatePolicy' denied on resource "
        f"'projects/{P}/global/networks/default'"
    )
    inv.policies.clear()
    (firewall,) = [
        g
        for g in identities.deploy_grants(
            DEP, project=P, project_number=iamrules.PROJECT_NUMBER, state_bucket="b-1"
        )
        if g.role == "tpudeployFirewall"
    ]
    assert firewall.condition is not None
    token = grant(inv, "tpudeployFirewall", permissions, firewall.condition.expression)
    assert _insert_rule(compute, token, "gemma4-x-deny-all") == 200
    # Another deployment's rule, or the default network's own, stays out of reach.
    assert _insert_rule(compute, token, "gemma4-y-deny-all") == 403
    assert "compute.firewalls.create" in call.last_error  # type: ignore[attr-defined]
    path = f"/compute/v1/projects/{P}/global/firewalls/gemma4-x-deny-all"
    assert call(compute.host, "DELETE", path, token) == 200


@pytest.mark.parametrize(
    ("expression", "resource", "granted"),
    [
        # An attribute the resource does not provide never grants ...
        (f"resource.name == 'projects/{P}/global/networks/default'", iamrules.NETWORK, False),
        ("resource.name.startsWith('projects/')", iamrules.PROJECT, False),
        ("resource.type == 'tpu.googleapis.com/Node'", iamrules.TPU_NODE, False),
        # ... what it provides does, and CEL's `true || error` is true (the guard form).
        (f"resource.type == '{iamrules.NETWORK}'", iamrules.NETWORK, True),
        (f"resource.type != '{iamrules.FIREWALL}' || resource.name == 'x'", iamrules.NETWORK, True),
        (f"resource.name == 'x' || resource.type != '{iamrules.FIREWALL}'", iamrules.NETWORK, True),
        (f"resource.type == '{iamrules.PROJECT}'", iamrules.PROJECT, True),
        ("resource.service == 'compute.googleapis.com'", iamrules.NETWORK, True),
    ],
)
def test_unavailable_attributes_never_grant(expression: str, resource: str, granted: bool) -> None:
    name = f"projects/{P}/global/networks/default"
    assert iamrules.condition_grants(expression, iamrules.Checked(resource, name, ())) is granted


def test_a_node_with_an_account_needs_actas_on_it(inv: Inventory) -> None:
    email = f"gemma4-x-node@{P}.iam.gserviceaccount.com"
    inv.put("iam", f"projects/{P}/serviceAccounts/{email}", {"email": email})
    token = grant(inv, "tpu", ("tpu.nodes.create",), None)
    body = {"acceleratorType": "v5litepod-1", "serviceAccount": {"email": email}}
    with FakeTpuApi(inventory=inv) as tpu:
        path = f"/v2/projects/{P}/locations/us-west4-a/nodes?nodeId=n-1"
        assert call(tpu.host, "POST", path, token, body) == 403
        assert "iam.serviceAccounts.actAs" in call.last_error  # type: ignore[attr-defined]
        account = f"iam/projects/{P}/serviceAccounts/{email}"
        inv.policies[account] = [{"role": "roles/iam.serviceAccountUser", "members": [DEPLOY]}]
        assert call(tpu.host, "POST", path, token, body) == 200


def test_guest_attributes_need_tpu_nodes_get_and_a_patch_tpu_nodes_update(
    inv: Inventory,
) -> None:
    """make wait and make status read the node's guest attributes: reading the node
    (iamrules.CHECKED_ON). A patch changes it in place: tpu.nodes.update, which the pipeline's
    tpudeployTpu role leaves out (tpudeploy/tpuvm/pipeline.py)."""
    parent = f"projects/{P}/locations/us-west4-a"
    node = f"/v2/{parent}/nodes/n-1"
    guest, query = f"{node}:getGuestAttributes", {"queryPath": "tpudeploy/"}
    patch, labels = f"{node}?updateMask=labels", {"labels": {"team": "a"}}
    deleter = grant(inv, "tpuDelete", ("tpu.nodes.delete",), None)
    with FakeTpuApi(inventory=inv) as tpu:
        create = f"/v2/{parent}/nodes?nodeId=n-1"
        assert call(tpu.host, "POST", create, None, {"acceleratorType": "v5litepod-1"}) == 200
        assert tpu.set_guest_attribute(f"{parent}/nodes/n-1", "tpudeploy/phase", "ready")
        assert call(tpu.host, "POST", guest, deleter, query) == 403
        assert call.last_error == (  # type: ignore[attr-defined]
            f"Permission 'tpu.nodes.get' denied on resource '{parent}/nodes/n-1'"
        )
        assert call(tpu.host, "PATCH", patch, deleter, labels) == 403
        assert "'tpu.nodes.update'" in call.last_error  # type: ignore[attr-defined]
        reader = grant(inv, "tpuRead", ("tpu.nodes.get",), None)
        assert call(tpu.host, "POST", guest, reader, query) == 200
        assert call(tpu.host, "PATCH", patch, reader, labels) == 403
        writer = grant(inv, "tpuWrite", ("tpu.nodes.update",), None)
        assert call(tpu.host, "PATCH", patch, writer, labels) == 200
        assert (tpu.node(f"{parent}/nodes/n-1") or {})["labels"] == {"team": "a"}


def test_every_permission_the_identities_grant_has_a_documented_home() -> None:
    """A permission the table does not place cannot be judged: each one the roles hold is in
    CHECKED_ON (the fakes assert on it) or belongs to an API the pipeline never calls."""
    unplaced = {
        p
        for _, permissions in identities.CUSTOM_ROLES.values()
        for p in permissions
        if p not in iamrules.CHECKED_ON
    }
    # Flex-start's queued resources go through the project's own client (local-exec), not the
    # provider; create and get are checked on the project like nodes when the fakes learn them
    # (delete is placed: a flex-start node's idle stop makes it, tests/rehearsal/
    # test_tpu_qr_delete.py).
    assert unplaced <= {"tpu.queuedResources.create", "tpu.queuedResources.get"}, unplaced
