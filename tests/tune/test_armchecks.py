"""Issue 40's arms: the MTP draft and parallel precompilation, and what an arm must pass before
any spend (tpudeploy/tune/armchecks.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tpudeploy import facts
from tpudeploy.config import parse_config
from tpudeploy.config import speculative as spec_data
from tpudeploy.render import vllm_serve_args
from tpudeploy.tune import armchecks
from tpudeploy.tune.arms import ARMS_DIR, BASELINE, load_arms
from tpudeploy.tune.plan import build_plan, flag_groups, plan_text

# Upstream's own run of this model with a draft (tpu-inference tests/e2e/
# test_speculative_decoding.py, test_gemma4_mtp_performance, commit b8692ff): written here from
# the source, not from the arm, so an arm that drifts from upstream fails.
DRAFT = "google/gemma-4-E2B-it-assistant"
UPSTREAM_MTP: dict[str, str | int] = {
    "model": DRAFT,
    "num_speculative_tokens": 4,
    "method": "mtp",
}


def shipped(name: str):  # type: ignore[no-untyped-def]
    loaded = {a.name: a for a in load_arms({}, source="deploy.toml", arms_dir=ARMS_DIR)}
    return loaded[name]


def write_arm(directory: Path, name: str, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.toml").write_text(text, encoding="utf-8")


def test_the_mtp_arm_is_upstreams_draft_as_vllm_reads_it() -> None:
    arm = shipped("mtp-assistant")
    assert arm.runnable, arm.refused
    assert arm.config is not None
    (value,) = flag_groups(vllm_serve_args(arm.config.vllm))["--speculative-config"]
    assert json.loads(value) == UPSTREAM_MTP


def test_the_precompile_arm_uses_the_hosts_vcpus() -> None:
    arm = shipped("precompile-workers")
    assert arm.runnable, arm.refused
    assert arm.config is not None
    # Google's VM types table: ct5lp-hightpu-1t (the v5litepod-1 host) has 24 vCPUs.
    assert arm.config.vllm.num_precompile_workers == 24
    assert arm.config.vllm.container_env()["NUM_PRECOMPILE_WORKERS"] == "24"


@pytest.mark.parametrize(
    ("overlay", "needle"),
    [
        (
            "[vllm]\nnum_precompile_workers = 25\n",
            "vllm.num_precompile_workers = 25: above the v5litepod-1 host's 24 vCPUs",
        ),
        (
            '[vllm]\nmodel = "google/gemma-4-E4B-it"\n[vllm.speculative_config]\nmethod = "mtp"\n'
            'model = "google/gemma-4-E2B-it-assistant"\nnum_speculative_tokens = 4\n',
            "it drafts for google/gemma-4-E2B-it, not for vllm.model = 'google/gemma-4-E4B-it'",
        ),
    ],
)
def test_an_arm_that_would_bill_for_nothing_is_refused_at_plan(
    tmp_path: Path, overlay: str, needle: str
) -> None:
    write_arm(tmp_path, "bad", '[arm]\ndescription = "x"\n' + overlay)
    loaded = load_arms({}, source="deploy.toml", arms_dir=tmp_path)
    bad = loaded[1]
    assert not bad.runnable
    assert any(needle in reason for reason in bad.refused), bad.refused
    text = plan_text(build_plan(loaded, profile="quick", rounds=1))
    assert "bad: REFUSED, not run: " in text and needle in text


def test_mtp_on_a_vllm_that_predates_it_is_refused_with_the_reason() -> None:
    cfg = shipped("mtp-assistant").config
    assert cfg is not None
    assert armchecks.refusals(cfg, pinned_vllm="0.33.0") == []
    (reason,) = armchecks.refusals(cfg, pinned_vllm="0.25.2")
    assert reason.startswith("vllm.speculative_config.method = 'mtp': the pinned vLLM 0.25.2")
    assert "0.26.1" in reason and "make pin" in reason
    # A development build of the minimum is the minimum (0.26.1rc1.dev125+g...: the build log's).
    assert armchecks.refusals(cfg, pinned_vllm="0.26.1rc1.dev125+ga7a204cc6") == []


def test_a_draft_that_does_not_fit_the_hf_tmpfs_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = shipped("mtp-assistant").config
    assert cfg is not None
    room = armchecks.hf_tmpfs_bytes()
    # The tmpfs is sized for the main checkpoint plus a quarter: it must hold the shipped draft.
    assert room >= facts.CHECKPOINT_BYTES + spec_data.DRAFTS[DRAFT].bytes
    big = spec_data.Draft(facts.MODEL, room - facts.CHECKPOINT_BYTES + 1, True, "a test")
    monkeypatch.setattr(armchecks, "draft_of", lambda v: (DRAFT, big) if v else None)
    (reason,) = armchecks.refusals(cfg)
    assert "do not fit the node's" in reason and "HF_HOME tmpfs" in reason


def test_the_plan_lists_the_new_arms_with_time_cost_and_what_is_checked_before_spend() -> None:
    loaded = load_arms({}, source="deploy.toml", arms_dir=ARMS_DIR)
    plan = build_plan(loaded, profile="full", rounds=3)
    text = plan_text(plan)
    for name in ("mtp-assistant", "precompile-workers"):
        block = text.split(f"\n{name}: ", 1)[1].split("\n\n", 1)[0]
        lines = block.splitlines()
        about = next(line for line in lines if line.strip().startswith("about "))
        assert " on the TPU VM" in about and "$" in about
    mtp = text.split("\nmtp-assistant: ", 1)[1].split("\nngram-speculative", 1)[0]
    assert "before spend: downloads the draft google/gemma-4-E2B-it-assistant" in mtp
    assert "accept its licence at https://huggingface.co/google/gemma-4-E2B-it-assistant" in mtp
    # The baseline downloads no draft and says nothing before spend.
    base = text.split(f"\n{BASELINE}: ", 1)[1].split("\n", 2)[1]
    assert "before spend" not in base


def test_speculative_methods_name_their_keys_and_drafts_their_sizes() -> None:
    assert spec_data.METHODS["mtp"].draft and not spec_data.METHODS["ngram"].draft
    for name, draft in spec_data.DRAFTS.items():
        assert draft.bytes > 0 and draft.source, name
    assert (
        parse_config({"vllm": {"speculative_config": dict(UPSTREAM_MTP)}}).vllm.speculative_config
        == UPSTREAM_MTP
    )
