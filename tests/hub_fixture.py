"""A loopback Hugging Face Hub holding this project's model and draft, gated as on the Hub, with
two tokens: one whose account accepted both licences, one whose account accepted none."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tools.rehearsal.fakes.hfhub import FakeHub, Repo, running
from tpudeploy import facts

DRAFT = "google/gemma-4-E2B-it-assistant"
# Where tpudeploy/hfhub.py finds the loopback Hub (named here, not imported, so that these tests
# run against code without the check too, and fail there).
FAKE_ENV = "HFHUB_FAKE_HOST"
# Built at run time (no tracked file holds a token-shaped string), in the format the node
# accepts (tpudeploy/config/secretshape.py).
ACCEPTED = "hf_" + "AcceptedLicenceToken0123456789ab"
NOT_ACCEPTED = "hf_" + "NoLicenceAcceptedToken012345678"
# The draft's files: the weights in two formats (vLLM takes the safetensors only), its config
# and tokenizer, and a README (counted: an upper bound).
DRAFT_FILES = {
    "config.json": 2_100,
    "model.safetensors": 158_000_000,
    "pytorch_model.bin": 158_400_000,
    "tokenizer.json": 33_400_000,
    "tokenizer_config.json": 1_200,
    "README.md": 9_000,
}


def gemma_hub(draft_files: dict[str, int] | None = None) -> FakeHub:
    return FakeHub(
        repos={
            facts.MODEL: Repo(
                {"config.json": 5_000, "model.safetensors": 10_200_000_000}, "manual"
            ),
            DRAFT: Repo(dict(draft_files or DRAFT_FILES), "manual"),
            "someone/private-model": Repo({"config.json": 10}, private=True),
        },
        tokens={ACCEPTED: {facts.MODEL, DRAFT}, NOT_ACCEPTED: set()},
    )


@contextmanager
def serving_hub(monkeypatch: pytest.MonkeyPatch, hub: FakeHub | None = None) -> Iterator[FakeHub]:
    with running(hub or gemma_hub()) as served:
        monkeypatch.setenv(FAKE_ENV, served.host)
        yield served
