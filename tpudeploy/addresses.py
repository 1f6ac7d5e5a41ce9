"""Terraform addresses the ops commands act on; stacks/tpu_node.py declares them under these ids."""

from __future__ import annotations

# Construct ids in the node stack (a construct id is the Terraform resource name: renaming one
# replaces the resource, so they stay short and fixed).
VM_ID = "node"
QUEUED_RESOURCE_ID = "queued-resource"

VM_ADDRESS = f"google_tpu_v2_vm.{VM_ID}"
QUEUED_RESOURCE_ADDRESS = f"terraform_data.{QUEUED_RESOURCE_ID}"
