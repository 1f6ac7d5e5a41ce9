"""The rehearsal's cloud serves a Hugging Face Hub on loopback (tools/rehearsal/fakes/cloud.py):
make secret and make tune ask it, never huggingface.co, and only the rehearsal's own token has
the licences accepted."""

from __future__ import annotations

import pytest

from tools.rehearsal.fakes.cloud import FakeCloud
from tpudeploy import facts, hfhub
from tpudeploy.config.speculative import DRAFTS

TOKEN = "hf_" + "RehearsalTokenAccepted0123456789"
OTHER = "hf_" + "SomeoneElsesToken012345678901234"


def test_the_rehearsals_environment_points_the_hub_client_at_its_loopback_hub(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeCloud() as cloud:
        env = cloud.environment()
        assert env[hfhub.FAKE_ENV].startswith("127.0.0.1:")
        monkeypatch.setenv(hfhub.FAKE_ENV, env[hfhub.FAKE_ENV])
        # Before the rehearsal accepts the licences, its token is no token the Hub knows.
        assert hfhub.check_repo(facts.MODEL, TOKEN).access == hfhub.BAD_TOKEN
        cloud.hub_accepts(TOKEN)
        cloud.hub.tokens[OTHER] = set()
        for repo in (facts.MODEL, *DRAFTS):
            answer = hfhub.check_repo(repo, TOKEN)
            assert answer.may_download, (repo, answer)
            assert hfhub.check_repo(repo, OTHER).access == hfhub.GATED_NO_ACCESS
        draft = hfhub.check_repo(next(iter(DRAFTS)), TOKEN)
        assert draft.download_bytes is not None
        assert draft.download_bytes <= next(iter(DRAFTS.values())).bytes
        asked = {r["path"] for r in cloud.hub.requests}
    assert f"/api/models/{facts.MODEL}/auth-check" in asked
