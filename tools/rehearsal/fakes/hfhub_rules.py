"""What the Hugging Face Hub answers the two calls tpudeploy/hfhub.py makes: data with sources.

The fake (tools/rehearsal/fakes/hfhub.py) answers from these rules and nothing else. Each rule
names where it is read and how firm that is: "documented" (a Hugging Face page or the
docstring of its own client), "client code" (huggingface_hub's error mapping, which reads the
Hub's headers), or "observed" (the Hub's own answers quoted in stored tracebacks and tests; no
stored page states them). Read 2026-12-03 in the stored copies.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    status: int
    error_code: str  # the X-Error-Code header, "" when none
    error_message: str  # the X-Error-Message header, "" when none
    basis: str  # documented | client code | observed
    source: str
    quote: str


# GET /api/models/{repo_id}/auth-check: huggingface_hub's HfApi.auth_check calls exactly this
# path ("path = f"{self.endpoint}/api/{repo_type}s/{repo_id}/auth-check""; hf_api.py, stored
# commit ee0a451 of 2026-08-20) and reads the answer through hf_raise_for_status. The stored
# copy of https://huggingface.co/docs/hub/api moved its endpoint list to the OpenAPI playground;
# the OpenAPI spec (huggingface.co/.well-known/openapi.json) is stored only truncated (a gist
# copy) and its auth-check entry was not found: the statuses below rest on the client's code
# and the Hub's observed answers, said so per rule.
AUTH_CHECK_PATH = "/api/models/{repo_id}/auth-check"
MODEL_INFO_PATH = "/api/models/{repo_id}"
MODEL_INFO_REVISION_PATH = "/api/models/{repo_id}/revision/{revision}"

ACCESS = Rule(
    200,
    "",
    "",
    "documented",
    "huggingface_hub hf_api.py HfApi.auth_check docstring",
    "Check if the provided user token has access to a specific repository ... If the repository "
    "is not found or if the user lacks the required permissions to access it, the method raises",
)

GATED_NO_ACCESS = Rule(
    403,
    "GatedRepo",
    "",
    "client code + observed",
    'huggingface_hub utils/_http.py hf_raise_for_status (error_code == "GatedRepo" -> '
    "GatedRepoError); the status: GatedRepoError tracebacks stored from huggingface.co "
    "(datasets/model-metadata/code_execution_files commits, 2025-2026)",
    "GatedRepoError: 403 Client Error. ... Access to model utter-project/EuroLLM-9B is restricted "
    "and you are not in the authorized list. Visit https://huggingface.co/utter-project/"
    "EuroLLM-9B to ask for access.",
)

# https://huggingface.co/docs/hub/models-gated, "Access gated models as a user": "To download
# files from a gated model you'll need to be authenticated" and "the requests have to be
# approved manually by the authors" (manual approval): with no token, a gated repo's files are
# refused; the status (401) is huggingface_hub's comment, below.
NO_TOKEN = Rule(
    401,
    "",
    "",
    "client code",
    "huggingface_hub utils/_http.py hf_raise_for_status",
    "401 is misleading as it is returned for: - private and gated repos if user is not "
    "authenticated - missing repos",
)

INVALID_TOKEN = Rule(
    401,
    "",
    "Invalid credentials in Authorization header",
    "client code",
    "huggingface_hub utils/_http.py hf_raise_for_status",
    'response.status_code == 401 and error_message != "Invalid credentials in Authorization '
    'header"',
)

# A missing (or private, to a token without access) repo, asked with a valid token: 404 and
# RepoNotFound. huggingface.js's own test of the same check: "should throw 404 when accessing
# unexisting repo authenticated" and "should throw 401 when accessing unexisting repo
# unauthenticated" (packages/hub/src/lib/check-repo-access.spec.ts).
NOT_FOUND = Rule(
    404,
    "RepoNotFound",
    "",
    "client code + observed",
    'huggingface_hub utils/_http.py (error_code == "RepoNotFound" -> RepositoryNotFoundError); '
    "huggingface.js check-repo-access.spec.ts",
    "should throw 404 when accessing unexisting repo authenticated",
)

# Any other 403 (no GatedRepo code): huggingface_hub's generic refusal of the token's rights. The
# fake has no fine-grained tokens, so it never answers this; the client's reading is tested with
# an answer set by hand (tests/shared/test_hfhub.py).
TOKEN_FORBIDDEN = Rule(
    403,
    "",
    "",
    "client code",
    "huggingface_hub utils/_http.py hf_raise_for_status",
    "elif response.status_code == 403: ... Make sure your token has the correct permissions.",
)

REVISION_NOT_FOUND = Rule(
    404,
    "RevisionNotFound",
    "",
    "client code",
    "huggingface_hub utils/_http.py hf_raise_for_status",
    'if error_code == "RevisionNotFound": ... Revision Not Found for url',
)

# GET /api/models/{repo_id}[/revision/{revision}]?blobs=true: HfApi.model_info(files_metadata=
# True) ("if files_metadata: params["blobs"] = True"; the revision path "quote(revision,
# safe='')"). Each sibling then carries its size: RepoSibling "size (`int`, *optional*): The
# file's size, in bytes. This attribute is defined when `files_metadata` argument of
# [`repo_info`] is set to `True`", and "lfs ... defined when`files_metadata` argument ... is set to
# `True` and the file is stored with Git LFS". `gated`: ModelInfo "gated
# (`Literal["auto", "manual", False]`, *optional*): Is the repo gated."
#
# Whether a gated repo's metadata is answered to a token without access: not in a stored page.
# huggingface.js issue #945 (2024) reports the Hub lists a gated repo's files whatever the
# token ("Now the authentication error is not thrown until an attempt is made to download one
# of the gated files"): the fake answers the metadata to any token, and the access question is
# the auth-check's alone.
METADATA_PUBLIC_FOR_GATED = True
METADATA_SOURCE = (
    "huggingface_hub hf_api.py HfApi.model_info, RepoSibling, ModelInfo; huggingface.js #945"
)
