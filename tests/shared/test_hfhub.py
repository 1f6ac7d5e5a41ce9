"""tpudeploy/hfhub.py against the loopback Hub (tools/rehearsal/fakes/hfhub.py), which answers by
the documented rules in hfhub_rules.py: two tokens, one with the gated licences accepted."""

from __future__ import annotations

import pytest

from tests.hub_fixture import ACCEPTED, DRAFT, DRAFT_FILES, NOT_ACCEPTED, gemma_hub, serving_hub
from tools.rehearsal.fakes import hfhub_rules as rules
from tpudeploy import hfhub


def test_a_token_whose_account_accepted_may_download_and_the_size_is_measured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with serving_hub(monkeypatch) as hub:
        answer = hfhub.check_repo(DRAFT, ACCEPTED)
    assert answer.may_download and answer.access == hfhub.MAY_DOWNLOAD
    assert answer.answered == "HTTP 200" and answer.gated == "manual"
    # vLLM takes one weights format, safetensors first; every other file counts (upper bound).
    expected = sum(v for k, v in DRAFT_FILES.items() if not k.endswith(".bin"))
    assert answer.download_bytes == expected and answer.weights_format == "*.safetensors"
    # The access check first, then the file list with sizes (blobs=true); the token only in the
    # Authorization header.
    paths = [r["path"] for r in hub.requests]
    assert paths == [f"/api/models/{DRAFT}/auth-check", f"/api/models/{DRAFT}?blobs=true"]
    assert all(r["authorization"] == f"Bearer {ACCEPTED}" for r in hub.requests)
    assert all(ACCEPTED not in r["path"] for r in hub.requests)


def test_a_token_whose_account_did_not_accept_gets_the_gated_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with serving_hub(monkeypatch):
        answer = hfhub.check_repo(DRAFT, NOT_ACCEPTED)
    assert not answer.may_download and answer.access == hfhub.GATED_NO_ACCESS
    status, code = rules.GATED_NO_ACCESS.status, rules.GATED_NO_ACCESS.error_code
    assert answer.answered == f"HTTP {status} (X-Error-Code {code})"
    # The metadata is public for a gated repo (huggingface.js #945): the size is still known.
    assert answer.download_bytes is not None


@pytest.mark.parametrize(
    ("repo", "token", "access"),
    [
        (DRAFT, "hf_" + "NotAnyAccountsToken0123456789ab", hfhub.BAD_TOKEN),
        (DRAFT, "", hfhub.NO_TOKEN),
        ("google/no-such-model", ACCEPTED, hfhub.NOT_FOUND),
        ("someone/private-model", ACCEPTED, hfhub.NOT_FOUND),
    ],
)
def test_the_other_refusals_by_their_documented_status(
    monkeypatch: pytest.MonkeyPatch, repo: str, token: str, access: str
) -> None:
    with serving_hub(monkeypatch) as hub:
        answer = hfhub.check_repo(repo, token)
    assert answer.access == access and answer.download_bytes is None
    assert len(hub.requests) == 1  # no file list for a repo the token cannot see
    assert hub.requests[0]["authorization"] == (f"Bearer {token}" if token else "")


def test_a_403_without_the_gated_code_is_the_tokens_permission(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hub = gemma_hub()
    monkeypatch.setattr(hub, "answer", lambda path, auth: (rules.TOKEN_FORBIDDEN, None))
    with serving_hub(monkeypatch, hub):
        answer = hfhub.check_repo(DRAFT, ACCEPTED)
    assert answer.access == hfhub.FORBIDDEN and answer.answered == "HTTP 403"


def test_a_pinned_revision_is_asked_by_its_path_and_an_unknown_one_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with serving_hub(monkeypatch) as hub:
        assert hfhub.check_repo(DRAFT, ACCEPTED, revision="main").may_download
        with pytest.raises(hfhub.HubError, match="has no revision 'v9/x'"):
            hfhub.check_repo(DRAFT, ACCEPTED, revision="v9/x")
    assert hub.requests[1]["path"] == f"/api/models/{DRAFT}/revision/main?blobs=true"
    assert hub.requests[-1]["path"] == f"/api/models/{DRAFT}/revision/v9%2Fx?blobs=true"


def test_a_failing_request_never_carries_the_token_in_its_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Nothing listens on port 9 (discard) here: the connection is refused.
    monkeypatch.setenv(hfhub.FAKE_ENV, "127.0.0.1:9")
    with pytest.raises(hfhub.HubError) as refused:
        hfhub.check_repo(DRAFT, ACCEPTED)
    assert "cannot reach" in str(refused.value) and ACCEPTED not in str(refused.value)
    # An answer this client does not know (a server error) is an error without the token too.
    hub = gemma_hub()
    broken = rules.Rule(500, "", f"echo {ACCEPTED}", "test", "-", "-")
    monkeypatch.setattr(hub, "answer", lambda path, auth: (broken, None))
    with serving_hub(monkeypatch, hub), pytest.raises(hfhub.HubError) as failed:
        hfhub.check_repo(DRAFT, ACCEPTED)
    assert "HTTP 500" in str(failed.value) and ACCEPTED not in str(failed.value)


def test_the_token_goes_in_clear_only_to_a_loopback_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(hfhub.FAKE_ENV, "10.1.2.3:80")
    with pytest.raises(hfhub.HubError, match="not a loopback host:port") as refused:
        hfhub.check_repo(DRAFT, ACCEPTED)
    assert ACCEPTED not in str(refused.value)
    with pytest.raises(hfhub.HubError, match="not a Hugging Face repo id"):
        hfhub.check_repo("../../etc", ACCEPTED)


def test_the_download_is_the_format_vllm_picks_plus_the_other_files() -> None:
    def sib(name: str, size: int, lfs: bool = False) -> dict[str, object]:
        return {
            "rfilename": name,
            "size": 134 if lfs else size,
            **({"lfs": {"size": size}} if lfs else {}),
        }

    # No safetensors: vLLM falls to *.bin; the LFS object's size counts, not the pointer's.
    only_bin = [sib("pytorch_model.bin", 5_000, lfs=True), sib("config.json", 7), sib("x.gguf", 9)]
    assert hfhub.download_bytes(only_bin) == (5_007, "*.bin")
    with pytest.raises(hfhub.HubError, match="without its size"):
        hfhub.download_bytes([{"rfilename": "model.safetensors"}])
