"""Plan inventories: each deployment's contract, the values that matter, on one screen.

cloud-foundation-fabric's model: a short YAML file per configuration (tests/inventories/) lists
the values a reviewer cares about in the synthesized JSON, and one helper compares them. When
they differ it prints the whole inventory to paste, and the command that rewrites the files, so
a deliberate change is reviewed as a diff of that file and an accidental one fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

INVENTORIES = Path(__file__).resolve().parent / "inventories"
WRITE_ENV = "TPUDEPLOY_WRITE_INVENTORIES"
REWRITE = f"{WRITE_ENV}=1 .venv/bin/python -m pytest -q tests/stacks/test_inventories.py"

# Per resource type, the arguments that make the contract. Everything else (long scripts,
# cdktf metadata) is left to the focused tests.
KEYS: dict[str, tuple[str, ...]] = {
    "google_project_service": ("service", "disable_on_destroy"),
    # The dashboard's JSON is judged by tests/shared/test_dashboard.py (schema, metrics); the
    # contract is that it exists, per deployment. A policy's name, query, window and channels.
    "google_monitoring_dashboard": ("project",),
    "google_monitoring_alert_policy": (
        "display_name",
        "combiner",
        "conditions",
        "notification_channels",
    ),
    "google_monitoring_notification_channel": ("type", "labels"),
    # A log-based metric's name (per deployment) and the filter that keeps it to its own logs.
    "google_logging_metric": ("name", "filter"),
    "google_service_account": ("account_id",),
    "google_secret_manager_secret": ("secret_id", "labels"),
    "google_secret_manager_secret_iam_member": ("secret_id", "role", "member", "condition"),
    "google_storage_bucket": (
        "name",
        "location",
        "uniform_bucket_level_access",
        "public_access_prevention",
        "force_destroy",
        "versioning",
        "lifecycle_rule",
        "lifecycle",
    ),
    "google_storage_bucket_iam_member": ("bucket", "role", "member", "condition"),
    "google_compute_firewall": (
        "name",
        "network",
        "direction",
        "priority",
        "allow",
        "deny",
        "source_ranges",
        "target_tags",
    ),
    "google_tpu_v2_vm": (
        "name",
        "zone",
        "accelerator_type",
        "runtime_version",
        "scheduling_config",
        "service_account",
        "network_config",
        "shielded_instance_config",
        "tags",
        "labels",
        "lifecycle",
    ),
    "google_project_iam_member": ("role", "member", "condition"),
    "google_project_iam_custom_role": ("role_id", "permissions"),
    "google_service_account_iam_member": ("service_account_id", "role", "member", "condition"),
    "google_iam_workload_identity_pool": ("workload_identity_pool_id",),
    "google_iam_workload_identity_pool_provider": (
        "workload_identity_pool_provider_id",
        "attribute_condition",
    ),
    "google_compute_router": ("name", "network", "region"),
    "google_compute_router_nat": (
        "name",
        "router",
        "region",
        "nat_ip_allocate_option",
        "source_subnetwork_ip_ranges_to_nat",
        "subnetwork",
    ),
    "google_cloud_scheduler_job": (
        "name",
        "region",
        "schedule",
        "time_zone",
        "paused",
        "http_target",
        "depends_on",
    ),
    # platform = "gke": the cluster stack (its Cloud Router and NAT use the keys above).
    "google_container_cluster": (
        "name",
        "location",
        "network",
        "remove_default_node_pool",
        "deletion_protection",
        "min_master_version",
        "release_channel",
        "workload_identity_config",
        "addons_config",
        "secret_manager_config",
        "monitoring_config",
        "private_cluster_config",
        "master_authorized_networks_config",
        "enable_shielded_nodes",
        "node_pool_defaults",
    ),
    "google_container_node_pool": (
        "name",
        "location",
        "node_count",
        "initial_node_count",
        "autoscaling",
        "management",
        "node_config",
    ),
    # the serving stack: probes, selectors, limits, the HPA's metric and bounds, the priorities.
    "kubernetes_namespace_v1": ("metadata",),
    "kubernetes_service_account_v1": ("metadata", "automount_service_account_token"),
    "kubernetes_config_map_v1": ("metadata",),
    "kubernetes_manifest": ("manifest",),
    "kubernetes_deployment_v1": ("metadata", "spec", "wait_for_rollout", "lifecycle"),
    "kubernetes_pod_disruption_budget_v1": ("metadata", "spec"),
    "kubernetes_network_policy_v1": ("metadata", "spec"),
    "kubernetes_service_v1": ("metadata", "spec"),
    "kubernetes_horizontal_pod_autoscaler_v2": ("metadata", "spec"),
    # the custom metrics adapter: who it is, what it may read, which API it serves.
    "kubernetes_cluster_role_v1": ("metadata", "rule"),
    "kubernetes_cluster_role_binding_v1": ("metadata", "role_ref", "subject"),
    "kubernetes_role_binding_v1": ("metadata", "role_ref", "subject"),
    "kubernetes_api_service_v1": ("metadata", "spec", "depends_on"),
}
# The queued resource's spec, as the TPU API receives it: the fields a reviewer checks.
SPEC_KEYS = (
    "project",
    "zone",
    "queued_resource_id",
    "node_id",
    "accelerator_type",
    "runtime_version",
    "service_account_email",
    "scopes",
    "network",
    "subnetwork",
    "enable_external_ips",
    "enable_secure_boot",
    "tags",
    "labels",
    "max_run_duration_seconds",
)


def _one(block: Any) -> Any:
    """A nested block of one, whether cdktf wrote it as an object or as a list of one."""
    return block[0] if isinstance(block, list) else block


def _resource(rtype: str, attrs: dict[str, Any]) -> dict[str, Any]:
    if rtype == "terraform_data" and isinstance(attrs.get("input"), dict):
        # What the node's boot reads (node-spec): a change to it replaces the VM.
        fingerprint = attrs["input"]
        return {
            "provider": attrs.get("provider"),
            "replaces_the_vm_on": sorted(fingerprint),
            "metadata_keys": sorted(fingerprint.get("metadata", {})),
        }
    if rtype == "terraform_data" and not str(attrs.get("input", "")).startswith("{"):
        # A value Terraform computes (the deadline of a spot or on-demand node): its expression
        # and how long it is kept.
        keep = ("input", "lifecycle", "triggers_replace")
        return {"provider": attrs.get("provider"), **{k: attrs[k] for k in keep if k in attrs}}
    if rtype == "terraform_data":
        spec = json.loads(attrs["input"])
        return {
            "provider": attrs.get("provider"),
            "spec": {k: spec.get(k) for k in SPEC_KEYS if k in spec},
            "metadata_keys": sorted(spec.get("metadata", {})),
            "provisioners": [
                {
                    "when": p["local-exec"].get("when", "create"),
                    "command": p["local-exec"]["command"],
                }
                for p in attrs.get("provisioner", [])
            ],
        }
    keys = KEYS.get(rtype)
    if keys is None:
        raise KeyError(f"{rtype}: add its contract to tests/inventory.py KEYS")
    found = {k: attrs[k] for k in keys if k in attrs}
    found["provider"] = attrs.get("provider")
    if rtype == "google_tpu_v2_vm":
        found["metadata_keys"] = sorted(attrs.get("metadata", {}))
    if rtype == "kubernetes_config_map_v1":
        found["data_keys"] = sorted(attrs.get("data", {}))
    if rtype == "kubernetes_deployment_v1":
        # The serve line is the TPU VM's (tests/stacks/test_gke_synth.py compares it): its flags
        # stay out of the inventory, which shows the pod's shape.
        for c in _one(_one(_one(found["spec"])["template"])["spec"])["container"]:
            if c.get("name") == "vllm":
                c["command"] = f"<vllm serve: {len(c['command'])} arguments>"
    return found


def inventory(stack: dict[str, Any]) -> dict[str, Any]:
    """The contract of one synthesized stack."""
    backend = stack.get("terraform", {}).get("backend", {})
    return {
        "required_providers": stack.get("terraform", {}).get("required_providers", {}),
        "backend": {kind: dict(settings) for kind, settings in backend.items()},
        "provider": stack.get("provider", {}),
        "variables": sorted(stack.get("variable", {})),
        "outputs": sorted(stack.get("output", {})),
        "resources": {
            f"{rtype}.{rid}": _resource(rtype, attrs)
            for rtype, items in sorted(stack.get("resource", {}).items())
            for rid, attrs in sorted(items.items())
        },
    }


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=True, default_flow_style=False, width=100)


def assert_inventory(name: str, actual: dict[str, Any]) -> None:
    """Compare `actual` with tests/inventories/<name>.yaml; say what to paste when they differ."""
    path = INVENTORIES / f"{name}.yaml"
    text = _dump(actual)
    if os.environ.get(WRITE_ENV):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    if not path.is_file():
        raise AssertionError(f"no inventory {path.name}; create it with:\n  {REWRITE}")
    expected = yaml.safe_load(path.read_text(encoding="utf-8"))
    if expected != yaml.safe_load(text):
        raise AssertionError(
            f"{path.relative_to(path.parents[2])} differs from the synthesized JSON. If the "
            f"change is intended, review and paste this (or run `{REWRITE}`):\n\n{text}"
        )
