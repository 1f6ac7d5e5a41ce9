"""The one way this project reaches a node's shell: gcloud's SSH to the TPU VM through IAP.

The node's firewall opens port 22 to Google's IAP range only (stacks/), so every SSH goes through
IAP. GA `gcloud compute tpus tpu-vm ssh` has no --tunnel-through-iap (Cloud SDK 528 and its
reference page list only --internal-ip) and rejects it as an unrecognized argument; the alpha
track has it, and is the track the build log drives TPU VMs with (`gcloud alpha compute tpus
tpu-vm create`). Used by make tunnel, make bench and make wait's hint alike.
"""

from __future__ import annotations

# Every TPU command the project runs or prints (ssh here, the queued-resource delete hint).
GCLOUD_TPUS = ("gcloud", "alpha", "compute", "tpus")
TPU_VM_SSH = (*GCLOUD_TPUS, "tpu-vm", "ssh")


def ssh_argv(node_id: str, zone: str, project: str | None) -> list[str]:
    """`gcloud alpha compute tpus tpu-vm ssh NODE --zone=Z [--project=P] --tunnel-through-iap`;
    callers append their own flags and `--` with the ssh arguments."""
    argv = [*TPU_VM_SSH, node_id, f"--zone={zone}"]
    if project:
        argv.append(f"--project={project}")
    argv.append("--tunnel-through-iap")
    return argv
