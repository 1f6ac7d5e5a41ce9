"""Deliberate breaks for the rehearsal: post-synth hooks that edit the synthesized JSON the way a
real defect would, so that tests/rehearsal/test_rehearsal.py can show the rehearsal failing on each.

Each takes cdktf.out and runs after every synth of the scratch copy (tools/rehearsal/post_synth.py);
all but `label_every_synth_differently` are idempotent.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Stack = dict[str, Any]


def _edit(outdir: Path, suffix: str, change: Callable[[Stack], None]) -> None:
    (path,) = [p for p in outdir.glob("stacks/*/cdk.tf.json") if p.parent.name.endswith(suffix)]
    stack = json.loads(path.read_text())
    change(stack)
    path.write_text(json.dumps(stack, indent=2))


def bind_to_google_ga(outdir: Path) -> None:
    """A resource without `provider`: Terraform maps google_* to hashicorp/google (issue 10)."""
    _edit(
        outdir,
        "-secrets",
        lambda s: s["resource"]["google_service_account"]["node-sa"].pop("provider", None),
    )


def reference_missing_resource(outdir: Path) -> None:
    """An interpolation naming a resource the stack does not declare."""

    def change(stack: Stack) -> None:
        grant = stack["resource"]["google_storage_bucket_iam_member"]["compile-cache-writer"]
        grant["member"] = "serviceAccount:${google_service_account.node-account.email}"

    _edit(outdir, "-secrets", change)


def invalid_expression(outdir: Path) -> None:
    """An interpolation Terraform cannot parse."""

    def change(stack: Stack) -> None:
        secret = stack["resource"]["google_secret_manager_secret"]["hf-token"]
        secret["secret_id"] = "${lower(var.project}-hf-token"  # noqa: S105 - an id, no secret

    _edit(outdir, "-secrets", change)


def unescape_boot_script(outdir: Path) -> None:
    """The boot script's bash `${...}` handed to Terraform as it is (no `$${` escape)."""

    def unescape(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("$${", "${")
        if isinstance(value, list):
            return [unescape(v) for v in value]
        if isinstance(value, dict):
            return {k: unescape(v) for k, v in value.items()}
        return value

    def change(stack: Stack) -> None:
        for resources in stack["resource"].values():
            for name, resource in resources.items():
                for key in ("input", "triggers_replace", "metadata"):
                    if key in resource:
                        resource[key] = unescape(resource[key])
                resources[name] = resource

    _edit(outdir, "-node", change)


def poller_never_reloads_nginx(outdir: Path) -> None:
    """The node's key poller rewrites the key map but signals nginx with CONT, not HUP: the
    running front door never loads a rotated key (the rehearsal's keys stage, issue 37)."""

    def swap(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("docker kill --signal=HUP", "docker kill --signal=CONT")
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        return value

    def change(stack: Stack) -> None:
        for resources in stack["resource"].values():
            for name, resource in resources.items():
                resources[name] = swap(resource)

    _edit(outdir, "-node", change)


def add_a_queued_resource_without_its_delete(outdir: Path) -> None:
    """A second flex-start queued resource declared with its create provisioner only: nothing
    on the destroy path deletes it (`make destroy`'s clean-up deletes the configured one by name,
    not this one), so it would bill on after `make destroy`."""

    def change(stack: Stack) -> None:
        resources = stack["resource"]["terraform_data"]
        spare = copy.deepcopy(resources["queued-resource"])
        spec = json.loads(spare["input"])
        spec["queued_resource_id"] += "-spare"
        spec["node_id"] += "-spare"
        text = json.dumps(spec, sort_keys=True)
        spare["input"] = text
        spare["triggers_replace"] = [text]
        spare["provisioner"] = [
            p for p in spare["provisioner"] if p["local-exec"].get("when") != "destroy"
        ]
        spare["//"]["metadata"]["path"] += "-spare"
        resources["queued-resource-spare"] = spare

    _edit(outdir, "-node", change)


def label_every_synth_differently(outdir: Path) -> None:
    """A value that changes at every synth: the second deploy plans an update."""

    def change(stack: Stack) -> None:
        bucket = stack["resource"]["google_storage_bucket"]["compile-cache"]
        bucket["labels"]["synthesized"] = str(time.time_ns())

    _edit(outdir, "-secrets", change)


def grant_viewer_instead_of_accessor(outdir: Path) -> None:
    """The node's grant on the token secret lets it see the secret, not read its versions."""

    def change(stack: Stack) -> None:
        grant = stack["resource"]["google_secret_manager_secret_iam_member"]["hf-token-accessor"]
        grant["role"] = "roles/secretmanager.viewer"

    _edit(outdir, "-secrets", change)


def patch_the_node_in_place(outdir: Path) -> None:
    """A spot or on-demand VM without its replacement trigger (main before issue 21): a changed
    config is patched into the running node's metadata, which no boot reads again."""

    def change(stack: Stack) -> None:
        vm = stack["resource"]["google_tpu_v2_vm"]["node"]
        vm.get("lifecycle", {}).pop("replace_triggered_by", None)
        if not vm.get("lifecycle"):
            vm.pop("lifecycle", None)

    _edit(outdir, "-node", change)
