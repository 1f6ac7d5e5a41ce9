"""Synth assertions for the boot path: compile-cache bucket, API-key secret and their IAM."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import Synthesizer, resources
from tpudeploy.config import DeployConfig
from tpudeploy.render import compile_cache_key, render_shutdown_script

SPOT = {"provisioning": "spot"}
NODE_MEMBER = "serviceAccount:${google_service_account.node-sa.email}"


def test_cache_bucket_is_private_uniform_and_kept(secrets_stack: dict[str, Any]) -> None:
    (bucket,) = resources(secrets_stack, "google_storage_bucket").values()
    assert bucket["name"] == "${var.project}-gemma4-v5e-xla"  # deterministic, no random suffix
    assert bucket["uniform_bucket_level_access"] is True
    assert bucket["public_access_prevention"] == "enforced"
    assert bucket["force_destroy"] is False
    assert bucket["location"] == "US-WEST4"  # next to the node: the archive moves every boot
    assert bucket["versioning"] == {"enabled": True}


def test_the_node_may_add_cache_entries_but_never_replace_one(
    secrets_stack: dict[str, Any],
) -> None:
    """Issue 13, defect 5: objectAdmin let the node overwrite and delete the archives every
    later node restores. Read and create only (replacing an object needs objects.delete)."""
    members = resources(secrets_stack, "google_storage_bucket_iam_member")
    assert sorted((m["role"], m["member"]) for m in members.values()) == [
        ("roles/storage.objectCreator", NODE_MEMBER),
        ("roles/storage.objectViewer", NODE_MEMBER),
    ]
    for member in members.values():
        assert member["bucket"] == "${google_storage_bucket.compile-cache.name}"
    for rtype in (
        "google_storage_bucket_iam_binding",
        "google_storage_bucket_iam_policy",
        "google_storage_bucket_acl",
        "google_storage_bucket_access_control",
        "google_storage_default_object_acl",
    ):
        assert resources(secrets_stack, rtype) == {}, rtype


def test_no_project_level_iam_and_no_public_members(default_stacks: dict[str, Any]) -> None:
    for name, stack in default_stacks.items():
        for rtype, found in stack.get("resource", {}).items():
            if rtype == "google_project_iam_member":
                # The node account's Ops Agent writers only (issue 38; docs/security.md).
                assert {(g["role"], g["member"]) for g in found.values()} == {
                    ("roles/logging.logWriter", NODE_MEMBER),
                    ("roles/monitoring.metricWriter", NODE_MEMBER),
                }, name
                continue
            assert not rtype.startswith("google_project_iam"), (name, rtype)
        text = json.dumps(stack)
        assert "allUsers" not in text and "allAuthenticatedUsers" not in text, name


def test_api_key_secret_is_readable_by_the_node_only(
    secrets_stack: dict[str, Any], default_config: DeployConfig
) -> None:
    secrets = resources(secrets_stack, "google_secret_manager_secret")
    assert secrets["api-key"]["secret_id"] == default_config.api_key_secret_id
    assert default_config.api_key_secret_id == "gemma4-v5e-api-key"  # noqa: S105 - an id
    grants = {
        m["secret_id"]: (m["role"], m["member"])
        for m in resources(secrets_stack, "google_secret_manager_secret_iam_member").values()
    }
    assert grants == {
        "${google_secret_manager_secret.hf-token.secret_id}": (
            "roles/secretmanager.secretAccessor",
            NODE_MEMBER,
        ),
        "${google_secret_manager_secret.api-key.secret_id}": (
            "roles/secretmanager.secretAccessor",
            NODE_MEMBER,
        ),
        # Issue 37: the node reads the deployment's one front-door certificate at boot; one
        # grant per secret, none on the project.
        "${google_secret_manager_secret.tls.secret_id}": (
            "roles/secretmanager.secretAccessor",
            NODE_MEMBER,
        ),
    }
    assert secrets["tls"]["secret_id"] == default_config.tls_secret_id
    assert "secret_data" not in secrets["tls"]  # a version is `make tls-cert`'s, never state's
    services = {s["service"] for s in resources(secrets_stack, "google_project_service").values()}
    assert "storage.googleapis.com" in services


def test_no_secret_value_reaches_the_synthesized_json(default_stacks: dict[str, Any]) -> None:
    for stack in default_stacks.values():
        # Values are added out of band (`make secret`, `make api-key`): no version resource, no
        # secret_data anywhere, so state never holds them either.
        assert resources(stack, "google_secret_manager_secret_version") == {}
        assert "secret_data" not in json.dumps(stack)


@pytest.mark.parametrize("overrides", [{}, SPOT], ids=["flex-start", "spot"])
def test_node_metadata_carries_both_scripts_and_guest_attributes(
    synth: Synthesizer, overrides: dict[str, Any]
) -> None:
    from tpudeploy.config import parse_config

    cfg = parse_config(dict(overrides))
    node = synth(overrides)[cfg.node_stack_name]
    text = json.dumps(node)
    assert "enable-guest-attributes" in text and "shutdown-script" in text
    if overrides == SPOT:
        (vm,) = resources(node, "google_tpu_v2_vm").values()
        md = vm["metadata"]
        assert md["enable-guest-attributes"] == "TRUE"
        # Terraform-escaped ($${...}) but otherwise the rendered script.
        assert md["shutdown-script"].replace("$${", "${").replace("%%{", "%{") == (
            render_shutdown_script(cfg)
        )
        assert "--allowed-media-domains media-urls-disabled.invalid" in md["startup-script"]
        assert "VLLM_MEDIA_URL_ALLOW_REDIRECTS=0" in md["startup-script"]


def test_the_node_may_create_its_own_configurations_archives_only(
    secrets_stack: dict[str, Any], default_config: DeployConfig
) -> None:
    """Issue 22, item 2: objectCreator on the whole bucket let a node plant archives for keys it
    does not serve. Create is conditioned on the object's name, as Cloud Storage spells it."""
    members = resources(secrets_stack, "google_storage_bucket_iam_member").values()
    by_role = {m["role"]: m for m in members}
    key = compile_cache_key(default_config)
    condition = by_role["roles/storage.objectCreator"]["condition"]
    assert condition["expression"] == (
        'resource.name.startsWith("projects/_/buckets/${var.project}-gemma4-v5e-xla'
        f'/objects/xla/{key}/")'
    )
    assert "condition" not in by_role["roles/storage.objectViewer"]
