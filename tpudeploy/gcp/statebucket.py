"""`make state-init`'s Cloud Storage calls: the deployment's Terraform state bucket, created with
the caller's own credentials and the settings the GitOps bootstrap gives its bucket
(stacks/bootstrap.py), so that a team shares one state and nobody loses it.

The settings, as the Cloud Storage JSON API names them (buckets.insert's body):
- versioning.enabled: every state write keeps the one before ("It is highly recommended that you
  enable Object Versioning on the GCS bucket to allow for state recovery in the case of
  accidental deletions and human error", https://developer.hashicorp.com/terraform/language/
  backend/gcs).
- iamConfiguration.uniformBucketLevelAccess.enabled: IAM alone decides who reads state (no
  object ACLs), and IAM Conditions on the bucket need it (https://cloud.google.com/storage/docs/
  access-control/iam).
- iamConfiguration.publicAccessPrevention = "enforced": state holds every resource's attributes;
  no grant may ever make it public.
- lifecycle: delete an archived version once `noncurrent_versions` newer ones exist (condition
  isLive = false, numNewerVersions = N: "Relevant only for versioned objects. If the value is N,
  this condition is satisfied when there are at least N versions (including the live version)
  newer than this version of the object", the JSON API's Bucket.lifecycle.rule.condition).
  Terraform's with_state = "ARCHIVED" in the bootstrap is the same condition.
Nothing here deletes a bucket or an object: there is no force-destroy to forget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from tpudeploy.errors import UserError
from tpudeploy.gcp import session as gcp_session
from tpudeploy.gcp.apis import STORAGE

# The bootstrap's default (tpudeploy/bootstrap_config.py: noncurrent_versions = 10): enough to
# roll back a bad apply, a bounded cost.
DEFAULT_NONCURRENT_VERSIONS = 10
# What the operator needs, and what teammates need: printed by `make state-init`.
CREATE_PERMISSION = "storage.buckets.create"
TEAM_ROLE = "roles/storage.objectAdmin"


class StateBucketError(UserError):
    """A Cloud Storage call for the state bucket failed; the message says what to do."""


@dataclass(frozen=True, slots=True)
class StateBucketSpec:
    name: str
    location: str
    noncurrent_versions: int = DEFAULT_NONCURRENT_VERSIONS

    def body(self) -> dict[str, Any]:
        """buckets.insert's request body."""
        return {
            "name": self.name,
            "location": self.location,
            "storageClass": "STANDARD",
            "versioning": {"enabled": True},
            "iamConfiguration": {
                "uniformBucketLevelAccess": {"enabled": True},
                "publicAccessPrevention": "enforced",
            },
            "lifecycle": {
                "rule": [
                    {
                        "action": {"type": "Delete"},
                        "condition": {
                            "isLive": False,
                            "numNewerVersions": self.noncurrent_versions,
                        },
                    }
                ]
            },
            "labels": {"managed_by": "tpudeploy", "purpose": "terraform-state"},
        }


def missing_settings(bucket: dict[str, Any]) -> list[str]:
    """The settings a state bucket must have that `bucket` (buckets.get's answer) lacks: an
    existing bucket is used only if it keeps state as safely as one state-init creates."""
    missing = []
    if not (bucket.get("versioning") or {}).get("enabled"):
        missing.append("versioning (gcloud storage buckets update gs://B --versioning)")
    iam = bucket.get("iamConfiguration") or {}
    if not (iam.get("uniformBucketLevelAccess") or {}).get("enabled"):
        missing.append(
            "uniform bucket-level access "
            "(gcloud storage buckets update gs://B --uniform-bucket-level-access)"
        )
    if iam.get("publicAccessPrevention") != "enforced":
        missing.append(
            "public access prevention (gcloud storage buckets update gs://B "
            "--public-access-prevention)"
        )
    return [m.replace("gs://B", f"gs://{bucket.get('name', 'B')}") for m in missing]


class StateBucketApi:
    """buckets.get and buckets.insert, with the caller's credentials (or the emulator)."""

    def __init__(self, *, session: Any, base_url: str = STORAGE.base_url) -> None:
        self.session = session
        self.base_url = base_url.rstrip("/")

    @classmethod
    def from_env(cls) -> StateBucketApi:
        """STORAGE_EMULATOR_HOST=host:port: plain HTTP, no credentials (tpudeploy/gcp/session.py);
        otherwise Application Default Credentials: the operator's own."""
        session, base_url = gcp_session.session(STORAGE, StateBucketError, from_disk_first=True)
        return cls(session=session, base_url=base_url)

    def _failures(self, what: str, refused: str) -> gcp_session.Failures:
        return gcp_session.Failures(
            StateBucketError,
            unreachable="cannot reach Cloud Storage ({error}); check the network",
            refused=f"Cloud Storage refused {what} (HTTP {{status}}): {refused}",
            otherwise=f"Cloud Storage answered HTTP {{status}} to {what}",
        )

    def get(self, name: str) -> dict[str, Any] | None:
        """The bucket's metadata; None when no bucket has this name."""
        response = gcp_session.call(
            self.session,
            "GET",
            f"{self.base_url}/storage/v1/b/{quote(name, safe='')}",
            self._failures(
                f"reading gs://{name}",
                "the bucket exists but your account cannot read it (another project's, or you "
                "need roles/storage.admin on it); choose another name with STATE_BUCKET=...",
            ),
            timeout=60,
            allow_404=True,
        )
        return None if response is None else dict(response.json())

    def insert(self, project: str, spec: StateBucketSpec) -> dict[str, Any]:
        """Create the bucket in `project`; a name taken by anyone else is refused with the fix."""
        failures = self._failures(
            f"creating gs://{spec.name}",
            f"your account needs {CREATE_PERMISSION} on project {project} (roles/storage.admin "
            "has it), and fresh credentials (`gcloud auth application-default login`)",
        )
        response = gcp_session.call(
            self.session,
            "POST",
            f"{self.base_url}/storage/v1/b",
            failures,
            timeout=60,
            ok=(200, 409),
            params={"project": project},
            json=spec.body(),
        )
        assert response is not None  # no 404 is allowed
        if response.status_code == 409:
            # Bucket names are global: someone else's bucket may hold this one.
            raise StateBucketError(
                f"the bucket name {spec.name!r} is taken (bucket names are global across all of "
                "Cloud Storage); choose another: make state-init STATE_BUCKET=<name>"
            )
        return dict(response.json())
