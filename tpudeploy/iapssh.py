"""The one way this project reaches a TPU VM's shell: gcloud's SSH to the node through IAP.

Below both platforms because the sweep (tpudeploy/bench/) runs on a TPU VM's node through it as
well as in a GKE pod (tpudeploy/gke/bench.py); the TPU VM's own commands use it too.

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


# gcloud's own words for each way an IAP SSH fails before reaching the node, and the fix. Matched
# on gcloud's stderr (case-insensitive); the first match wins, so the most specific comes first.
# Sources: gcloud's messages as it prints them (auth: "You do not currently have an active
# account selected"; components: "You do not currently have this command group installed");
# IAP's error codes (https://cloud.google.com/iap/docs/using-tcp-forwarding#troubleshooting:
# 4003 failed to connect to backend, 4033 not authorized); OS Login's roles
# (https://cloud.google.com/compute/docs/oslogin/set-up-oslogin#configure_users).
GCLOUD_FAILURES: tuple[tuple[str, str], ...] = (
    (
        r"do not currently have an active account|gcloud auth login|reauthentication|"
        r"problem refreshing your current auth tokens",
        "gcloud is not logged in (or its login expired): run `gcloud auth login`, then try again",
    ),
    (
        r"command group installed|components: \[alpha\]",
        "gcloud lacks its alpha component: run `gcloud components install alpha`",
    ),
    (
        r"4033|not authorized",
        "IAP refused the tunnel: your account needs the IAP-secured Tunnel User role "
        "(roles/iap.tunnelResourceAccessor) on the project",
    ),
    (
        r"4003|failed to connect to backend",
        "IAP reached no SSH server on the node: it is not running yet (make status), or no "
        "firewall rule lets IAP's range reach port 22",
    ),
    (
        r"permission denied \(publickey\)|osAdminLogin|osLogin",
        "the node refused your login: your account needs OS Login on it "
        "(roles/compute.osAdminLogin or roles/compute.osLogin)",
    ),
    (
        r"not_found|was not found",
        "the node does not exist: `make status` says what runs, `make deploy` creates it",
    ),
    (
        r"ConnectionResetError",
        "gcloud's SSH crashed with ConnectionResetError, as the build log saw in sandboxed "
        "shells: run it from a plain terminal",
    ),
)


def gcloud_failure(stderr: str) -> str | None:
    """What gcloud's SSH said went wrong, in one line with the fix, quoting gcloud's own last
    error line whole; None when it names no known cause (the command itself failed)."""
    import re

    said = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in said if line.startswith("ERROR:")] or said[-1:]
    quote = f' (gcloud: "{errors[-1]}")' if errors else ""
    for pattern, cause in GCLOUD_FAILURES:
        if re.search(pattern, stderr, flags=re.IGNORECASE):
            return f"{cause}{quote}"
    return None
