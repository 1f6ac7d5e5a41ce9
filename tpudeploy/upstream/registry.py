"""Docker Hub's documented tag endpoint: the digest a tag of vllm/vllm-tpu points at right now.

GET https://hub.docker.com/v2/namespaces/{namespace}/repositories/{repository}/tags/{tag}
"Returns details for a specific tag in the specified repository"
(https://docs.docker.com/reference/api/hub/latest/operations/GetRepositoryTag.md); its `digest`
is the manifest list's, the digest `docker pull repo@sha256:...` and the node's RepoDigest name
(tpudeploy/tpuvm/pin.py pins the same). Public repositories need no token. The image is pinned by
digest, not by a wheel: no PyPI package is pinned, so none is watched.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from tpudeploy.errors import UserError

DOCKER_HUB = "https://hub.docker.com"
# The workflow reaches Docker Hub; the tests and the rehearsal a loopback fake.
REGISTRY_URL_ENV = "UPSTREAM_REGISTRY_URL"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
TIMEOUT_SECONDS = 30
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
# repository[:tag][@sha256:digest], Docker Hub only (no registry host: the default image's).
IMAGE_RE = re.compile(
    r"^(?P<repo>[a-z0-9]+(?:[._-][a-z0-9]+)*/[a-z0-9]+(?:[._-][a-z0-9]+)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127}))?(?:@sha256:(?P<digest>[0-9a-f]{64}))?$"
)


class RegistryError(UserError):
    """The registry could not be read, or answered something that is not a tag's digest."""


@dataclass(frozen=True)
class ImageRef:
    repository: str  # namespace/name on Docker Hub
    tag: str | None
    digest: str | None  # 64 hex digits

    @classmethod
    def parse(cls, image: str, *, key: str = "vllm.image") -> ImageRef:
        m = IMAGE_RE.fullmatch(image)
        if not m:
            raise RegistryError(
                f"{key} = {image!r}: the watch reads Docker Hub images only "
                "(namespace/name[:tag]@sha256:<digest>, e.g. vllm/vllm-tpu:nightly@sha256:...); "
                "fix the image or leave [watch] enabled = false"
            )
        return cls(m["repo"], m["tag"], m["digest"])

    def pinned(self, digest: str) -> str:
        """The reference the node pulls: the tag kept for people, the digest for the pull."""
        return f"{self.repository}{f':{self.tag}' if self.tag else ''}@sha256:{digest}"


@dataclass(frozen=True)
class Release:
    tag: str
    digest: str  # 64 hex digits
    last_updated: str


def _base(url: str) -> str:
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme == "https" and parsed.hostname:
        return url.rstrip("/")
    if parsed.scheme == "http" and parsed.hostname in LOOPBACK_HOSTS:
        return url.rstrip("/")
    raise RegistryError(
        f"{REGISTRY_URL_ENV} = {url!r}: https, or plain http to a loopback fake only; unset it "
        f"for {DOCKER_HUB}"
    )


def latest(repository: str, tag: str, *, base_url: str = DOCKER_HUB) -> Release:
    """The digest `repository:tag` points at now."""
    namespace, _, name = repository.partition("/")
    path = "/v2/namespaces/{}/repositories/{}/tags/{}".format(
        *(urllib.parse.quote(p, safe="") for p in (namespace, name, tag))
    )
    url = _base(base_url) + path
    request = urllib.request.Request(  # noqa: S310 - the scheme is checked in _base
        url, headers={"Accept": "application/json", "User-Agent": "tpudeploy-upstream-watch"}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
            body = json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        raise RegistryError(
            f"{url}: the registry answered {exc.code}"
            + (f"; is {repository}:{tag} a published tag?" if exc.code == 404 else "")
        ) from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise RegistryError(f"{url}: cannot reach the registry ({reason})") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RegistryError(f"{url}: the answer is not JSON") from None
    digest = body.get("digest") if isinstance(body, dict) else None
    if not isinstance(digest, str) or not DIGEST_RE.fullmatch(digest):
        raise RegistryError(
            f"{url}: no sha256 digest in the answer ({str(digest)[:80]!r}); nothing to pin"
        )
    return Release(tag, digest.removeprefix("sha256:"), str(body.get("last_updated", "")))
