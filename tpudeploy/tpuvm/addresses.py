"""Terraform addresses the ops commands act on; stacks/tpuvm/node.py declares them by these ids."""

from __future__ import annotations

from tpudeploy import deadline

# Construct ids in the node stack (a construct id is the Terraform resource name: renaming one
# replaces the resource, so they stay short and fixed).
VM_ID = "node"
QUEUED_RESOURCE_ID = "queued-resource"
# Spot and on-demand: what the node's boot reads; a change to it replaces the VM.
NODE_SPEC_ID = "node-spec"

# Flex-start with [idle] stop_after: when the node's grant to delete its queued resource ends
# (the queued resource's creation plus max_run_duration; stacks/tpuvm/node.py).
IDLE_END_ID = "idle-grant-end"

VM_ADDRESS = f"google_tpu_v2_vm.{VM_ID}"
QUEUED_RESOURCE_ADDRESS = f"terraform_data.{QUEUED_RESOURCE_ID}"

# Spot and on-demand: the deadline fixed at deploy time and the Cloud Scheduler job enforcing it
# (stacks/deadline_job.py, tpudeploy/deadline.py: the same ids in GKE's cluster stack).
DEADLINE_ID = deadline.DEADLINE_ID
DEADLINE_JOB_ID = deadline.DEADLINE_JOB_ID
DEADLINE_ADDRESS = deadline.DEADLINE_ADDRESS
DEADLINE_JOB_ADDRESS = deadline.DEADLINE_JOB_ADDRESS
# Every deployed node stack holds its deny-all rule, whatever the node's state: the mark that the
# stack is deployed (recover never brings back a node that `make destroy` removed).
DENY_ALL_ADDRESS = "google_compute_firewall.deny-all"
