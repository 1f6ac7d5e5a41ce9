"""Google Cloud naming rules and the names derived from them, each defined once.

Standard library only (the GitOps helper runs under a bare python3). A rule lives here as a
pattern string plus a compiled full-match regex; every module that checks or builds such a name
imports it from here (tests/layout/test_one_home.py keeps it so).
"""

from __future__ import annotations

import re
from typing import Final

# Project ids: 6-30 lowercase letters, digits and hyphens, starting with a letter.
PROJECT_ID: Final = r"[a-z][a-z0-9-]{4,28}[a-z0-9]"
# GCE resource names (RFC 1035): networks, subnetworks, firewalls, TPU nodes.
GCE_NAME: Final = r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?"
REGION: Final = r"[a-z]+-[a-z]+[0-9]+"
ZONE: Final = rf"(?P<region>{REGION})-[a-z]"
LABEL_KEY: Final = r"[a-z][a-z0-9_-]{0,62}"
LABEL_VALUE: Final = r"[a-z0-9_-]{0,63}"
# A deployment name prefixes the node, its service account ("<name>-node", at most 30) and the
# secrets: 3-24 characters.
DEPLOYMENT_NAME: Final = r"[a-z][a-z0-9-]{1,22}[a-z0-9]"
BUCKET: Final = r"[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]"
SERVICE_ACCOUNT_ID: Final = r"[a-z][a-z0-9-]{4,28}[a-z0-9]"
NETWORK_PATH: Final = rf"projects/{PROJECT_ID}/global/networks/{GCE_NAME}"
SUBNETWORK_PATH: Final = rf"projects/{PROJECT_ID}/regions/{REGION}/subnetworks/{GCE_NAME}"
# A queued resource id is looser than a GCE name (the TPU API's own rule).
QUEUED_RESOURCE_ID: Final = r"[A-Za-z0-9_.~+%-]{1,63}"

PROJECT_ID_RE: Final = re.compile(PROJECT_ID)
GCE_NAME_RE: Final = re.compile(GCE_NAME)
REGION_RE: Final = re.compile(REGION)
ZONE_RE: Final = re.compile(ZONE)
LABEL_KEY_RE: Final = re.compile(LABEL_KEY)
LABEL_VALUE_RE: Final = re.compile(LABEL_VALUE)
DEPLOYMENT_NAME_RE: Final = re.compile(DEPLOYMENT_NAME)
BUCKET_RE: Final = re.compile(BUCKET)
SERVICE_ACCOUNT_ID_RE: Final = re.compile(SERVICE_ACCOUNT_ID)
NETWORK_PATH_RE: Final = re.compile(NETWORK_PATH)
SUBNETWORK_PATH_RE: Final = re.compile(SUBNETWORK_PATH)
QUEUED_RESOURCE_ID_RE: Final = re.compile(QUEUED_RESOURCE_ID)

# Cloud Storage refuses, at create time, a bucket name that begins with "goog" or contains
# "google" or a close misspelling such as "g00gle" (cloud.google.com/storage/docs/buckets#naming,
# "Bucket naming"). Checked on the name we derive, before any API call.
BUCKET_RESERVED_PREFIX: Final = "goog"
BUCKET_RESERVED_WORD: Final = "google"
# The misspellings the rule names: a zero for an "o".
_LOOKALIKES: Final = str.maketrans({"0": "o"})


def bucket_name_problem(bucket: str) -> str:
    """Why Cloud Storage would refuse `bucket` for its reserved words, or "" when it would not."""
    if bucket.startswith(BUCKET_RESERVED_PREFIX):
        return f'begins with "{BUCKET_RESERVED_PREFIX}", which Cloud Storage reserves'
    if BUCKET_RESERVED_WORD in bucket.translate(_LOOKALIKES):
        return (
            f'contains "{BUCKET_RESERVED_WORD}" (or a look-alike such as "g00gle"), which Cloud '
            "Storage refuses in bucket names"
        )
    return ""


# The only OAuth scope the node and the clients ask for; IAM decides what it can do.
CLOUD_PLATFORM_SCOPE: Final = "https://www.googleapis.com/auth/cloud-platform"
# The TPU API (v2, GA): the deadline job's DELETE (tpudeploy/tpuvm/deadline_target.py) and the
# idle stop's (templates/_idle_watch.sh.j2) name the same node under it.
TPU_API: Final = "https://tpu.googleapis.com/v2"


def region_of(zone: str) -> str:
    """'us-west4-a' -> 'us-west4'; raise ValueError for anything that is not a zone."""
    match = ZONE_RE.fullmatch(zone)
    if match is None:
        raise ValueError(f"{zone!r} is not a zone name (e.g. us-west4-a)")
    return match["region"]


def service_account_email(account_id: str, project: str) -> str:
    """Deterministic, so a stack needs no lookup of an account another stack created."""
    return f"{account_id}@{project}.iam.gserviceaccount.com"


def node_account_id(deployment: str) -> str:
    """The node's own service account: "<name>-node" (at most 24 + 5 = 29 characters)."""
    return f"{deployment}-node"


# Each pipeline deployment's own deploy identity, created by the bootstrap: "<name>-apply" is at
# most 24 + 6 = 30 characters, the service-account id limit; it never collides with "-node".
DEPLOY_ACCOUNT_SUFFIX: Final = "-apply"


def deploy_account_id(deployment: str) -> str:
    return f"{deployment}{DEPLOY_ACCOUNT_SUFFIX}"


# The identity of each deployment's deadline job (spot, on-demand): "<name>-stop", at most
# 24 + 5 = 29 characters; it never collides with "-node" or "-apply".
STOP_ACCOUNT_SUFFIX: Final = "-stop"


def stop_account_id(deployment: str) -> str:
    return f"{deployment}{STOP_ACCOUNT_SUFFIX}"
