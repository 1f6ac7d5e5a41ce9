"""make tune: arms as data, the plan and its cost, the statistics, and a resumable runner."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tools import tune_example
from tools.tune_example import Effect
from tpudeploy import facts
from tpudeploy.bench.stats import METRICS
from tpudeploy.config import parse_config
from tpudeploy.planner.cost import hourly_cost, price_table
from tpudeploy.render import render_startup_script, vllm_serve_args
from tpudeploy.tune import tomlwrite
from tpudeploy.tune.arms import ARMS_DIR, BASELINE, Arm, ArmError, load_arms
from tpudeploy.tune.plan import build_plan, flag_groups, plan_text, schedule
from tpudeploy.tune.ranking import collect, write_report
from tpudeploy.tune.runner import StepResult, TuneError, arm_config_file, run_tune, status_path
from tpudeploy.tune.verdict import BETTER, NOISY, UNCLEAR, WORSE, compare, judge

AGGREGATE = next(m for m in METRICS if m.key == "aggregate")
TTFT = next(m for m in METRICS if m.key == "ttft")
# What each shipped arm must change in the `vllm serve` line or the environment, and nothing
# else: the build log's four untested ideas and issue 40's two, spelled as vLLM and
# tpu-inference read them.
SHIPPED: dict[str, dict[str, object]] = {
    "max-model-len-65536": {"--max-model-len": ("65536",)},
    "batched-tokens-8192": {"--max-num-batched-tokens": ("8192",)},
    "bucket-padding-128": {"env:VLLM_TPU_BUCKET_PADDING_GAP": "128"},
    "ngram-speculative": {"--speculative-config": None},
    # Issue 40's arms: upstream's Gemma 4 MTP draft, and parallel precompilation.
    "mtp-assistant": {"--speculative-config": None},
    "precompile-workers": {"env:NUM_PRECOMPILE_WORKERS": "24"},
}


def arms(base: Mapping[str, Any] | None = None, arms_dir: Path = ARMS_DIR, **kw: Any) -> list[Arm]:
    return load_arms(dict(base or {}), source="deploy.toml", arms_dir=arms_dir, **kw)


def write_arm(directory: Path, name: str, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.toml").write_text(text, encoding="utf-8")


# ---- arms ---------------------------------------------------------------------------------


def test_every_shipped_arm_is_its_idea_and_nothing_else() -> None:
    loaded = {arm.name: arm for arm in arms()}
    assert set(loaded) == {BASELINE, *SHIPPED}
    base = loaded[BASELINE].config
    assert base is not None and loaded[BASELINE].runnable
    base_flags = flag_groups(vllm_serve_args(base.vllm))
    for name, expected in SHIPPED.items():
        arm = loaded[name]
        assert arm.runnable, (name, arm.refused)
        assert arm.config is not None
        flags = flag_groups(vllm_serve_args(arm.config.vllm))
        changed = {k: v for k, v in flags.items() if base_flags.get(k) != v}
        env = {
            f"env:{k}": v
            for k, v in arm.config.vllm.container_env().items()
            if base.vllm.container_env().get(k) != v
        }
        got: dict[str, object] = {**changed, **env}
        assert set(got) == set(expected), name
        for key, value in expected.items():
            if value is not None:
                assert got[key] == value, name
        # Its whole boot renders: the line reaches the node's startup script.
        assert "vllm serve" in render_startup_script(arm.config)


def test_the_ngram_arm_is_the_json_vllm_reads() -> None:
    arm = next(a for a in arms() if a.name == "ngram-speculative")
    assert arm.config is not None
    value = flag_groups(vllm_serve_args(arm.config.vllm))["--speculative-config"]
    spec = json.loads(value[0])
    # vLLM's SpeculativeConfig keys for n-gram (docs.vllm.ai features/speculative_decoding/n_gram)
    assert spec["method"] == "ngram"
    assert set(spec) <= {
        "method",
        "num_speculative_tokens",
        "prompt_lookup_max",
        "prompt_lookup_min",
    }
    assert spec["num_speculative_tokens"] >= 1


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"method": "eagle", "num_speculative_tokens": 3}, "method 'eagle' is not offered"),
        ({"method": "ngram"}, "num_speculative_tokens is required"),
        ({"method": "ngram", "num_speculative_tokens": 0}, "at least 1"),
        ({"method": "ngram", "num_speculative_tokens": 2, "model": "x/y"}, "unknown key 'model'"),
        (
            {
                "method": "ngram",
                "num_speculative_tokens": 2,
                "prompt_lookup_min": 5,
                "prompt_lookup_max": 2,
            },
            "above prompt_lookup_max",
        ),
    ],
)
def test_speculative_config_refusals_name_the_fix(spec: dict[str, object], needle: str) -> None:
    with pytest.raises(Exception) as info:
        parse_config({"vllm": {"speculative_config": spec}})
    text = str(info.value)
    assert "vllm.speculative_config" in text and needle in text and "Fix:" in text


def test_an_arm_the_guard_rails_refuse_is_reported_not_run(tmp_path: Path) -> None:
    write_arm(
        tmp_path, "gpu-095", '[arm]\ndescription = "0.95"\n[vllm]\ngpu_memory_utilization = 0.95\n'
    )
    loaded = arms(arms_dir=tmp_path)
    refused = loaded[1]
    assert not refused.runnable and any("gpu_memory_utilization" in p for p in refused.refused)
    plan = build_plan(loaded, profile="quick", rounds=1)
    assert [p.arm.name for p in plan.arms] == [BASELINE]
    assert [u for u in plan.order if u[1] == "gpu-095"] == []
    assert "gpu-095: REFUSED, not run: " in plan_text(plan)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('zone = "us-central1-a"\n[arm]\ndescription = "x"\n', "zone: an arm may not change it"),
        ('[arm]\ndescription = "x"\n[bench]\nrepetitions = 1\n', "bench: an arm may not change it"),
        ("[vllm]\nmax_model_len = 16384\n", "no [arm] description"),
        ('[arm]\ndescription = "x"\n', "changes nothing"),
        (
            '[arm]\ndescription = "x"\ncolour = 1\n[vllm]\nmax_model_len = 1\n',
            "arm.colour: unknown",
        ),
        ('colour = 1\n[arm]\ndescription = "x"\n[vllm]\nmax_model_len = 16384\n', None),
    ],
)
def test_bad_arm_files_name_the_file_and_the_fix(
    tmp_path: Path, text: str, needle: str | None
) -> None:
    write_arm(tmp_path, "bad", text)
    if needle is None:
        # An unknown config key is the schema's refusal, reported like any config problem.
        bad = arms(arms_dir=tmp_path)[1]
        assert not bad.runnable and any("colour" in p for p in bad.refused)
        return
    with pytest.raises(ArmError) as info:
        arms(arms_dir=tmp_path)
    assert str(tmp_path / "bad.toml") in str(info.value) and needle in str(info.value)


def test_an_arm_named_baseline_is_refused(tmp_path: Path) -> None:
    write_arm(tmp_path, BASELINE, '[arm]\ndescription = "x"\n[vllm]\nmax_model_len = 16384\n')
    with pytest.raises(ArmError, match="is the baseline"):
        arms(arms_dir=tmp_path)


def test_arms_overlay_the_users_config_table_by_table() -> None:
    base = {"name": "mine", "vllm": {"max_num_batched_tokens": 4096, "slice_rope_cache": True}}
    arm = next(a for a in arms(base) if a.name == "max-model-len-65536")
    assert arm.config is not None
    assert arm.config.name == "mine" and arm.config.vllm.slice_rope_cache
    assert arm.config.vllm.max_model_len == 65536


def test_the_arm_file_make_tune_deploys_reads_back_as_the_arm() -> None:
    base = {
        "project": "p-123456",
        "labels": {"team": "ml"},
        "vllm": {"extra_args": ["--seed", "1"]},
    }
    for arm in arms(base)[1:]:
        text = arm_config_file(arm, "quick")
        data = tomllib.loads(text)
        assert data["bench"]["repetitions"] == 1 and data["bench"]["quick"]["repetitions"] == 1
        cfg = parse_config(data)
        assert arm.config is not None
        assert vllm_serve_args(cfg.vllm) == vllm_serve_args(arm.config.vllm)
        assert cfg.labels == {"team": "ml"}


@pytest.mark.parametrize(
    "data",
    [
        {"a": 1, "b": 'x"y\\z\n', "c": [1, 2], "d": {"e": True, "f": {"g": 1.5}}},
        {"prices": {"us-east5": {"spot": 0.5, "as_of": __import__("datetime").date(2026, 8, 9)}}},
        {"key with space": {"inline": {"x": 1}}, "empty": {}},
    ],
)
def test_toml_writer_round_trips(data: dict[str, Any]) -> None:
    assert tomllib.loads(tomlwrite.dumps(data, header="a\nb")) == data


# ---- the plan -----------------------------------------------------------------------------


def test_schedule_interleaves_the_arms_across_rounds() -> None:
    names = ["a", "b", "c", "d"]
    order = schedule(names, 3)
    rounds = [[n for r, n in order if r == k] for k in (1, 2, 3)]
    assert all(sorted(r) == names for r in rounds)
    # No arm is first (or last) in every round: drift over time does not favour one.
    assert len({r[0] for r in rounds}) == 3 and len({r[-1] for r in rounds}) == 3


def test_the_plan_prices_the_planners_boots_and_the_sweeps_at_the_configured_rate() -> None:
    loaded = arms()
    plan = build_plan(loaded, profile="quick", rounds=3)
    cfg = loaded[0].config
    assert cfg is not None
    # Independently: the quick cells' output tokens over the build log's throughput there.
    quick = [(128, 1), (128, 16), (1024, 1), (1024, 16)]
    sweep = sum(max(c * 8, 32) * 256 / facts.AGGREGATE_TOK_S[(ctx, c)] for ctx, c in quick)
    per_arm = facts.COLD_BOOT_S + 2 * facts.WARM_BOOT_S + 3 * sweep
    every = len(SHIPPED) + 1  # the shipped arms and the baseline
    assert plan.tpu_vm.seconds == pytest.approx(every * per_arm)
    rate = facts.PRICES["us-west4"].per_chip_hour["flex-start"]
    assert plan.tpu_vm.dollars == pytest.approx(every * per_arm / 3600 * rate)
    assert hourly_cost("flex-start", prices=price_table(cfg)) == rate
    # Side by side: one boot sequence and one sweep per round, one chip per arm.
    assert plan.gke.seconds == pytest.approx(per_arm)
    spot = facts.PRICES["us-west4"].per_chip_hour["spot"]
    assert plan.gke.dollars == pytest.approx(every * per_arm / 3600 * spot)
    text = plan_text(plan)
    assert "~ --max-model-len 32768 -> 65536" in text
    assert "+ VLLM_TPU_BUCKET_PADDING_GAP 128" in text
    assert f"${plan.tpu_vm.dollars:,.2f} at flex-start in us-west4" in text


# ---- the statistics -----------------------------------------------------------------------


def values(mean: float, cv: float) -> list[float]:
    """Three repetitions whose sample cv is exactly `cv`."""
    return [mean * (1 + cv * k) for k in (-1.0, 0.0, 1.0)]


@pytest.mark.parametrize(
    ("factor", "cv", "label"),
    [
        (1.05, 0.01, BETTER),  # 5% better, cv 1%: found
        (1.05, 0.20, NOISY),  # 5% better, cv 20%: not trusted
        (0.95, 0.01, WORSE),
        (1.01, 0.03, UNCLEAR),  # inside the noise
    ],
)
def test_the_bar_for_better(factor: float, cv: float, label: str) -> None:
    verdict = judge(values(100 * factor, cv), values(100, 0.01), AGGREGATE, (128, 16))
    assert verdict.label == label
    assert verdict.ratio == pytest.approx(factor)
    assert verdict.interval is not None and verdict.ratio is not None
    assert verdict.interval.low <= verdict.ratio <= verdict.interval.high


def test_ttft_is_oriented_so_that_above_one_is_better() -> None:
    faster = judge(values(95, 0.01), values(100, 0.01), TTFT, (128, 1))
    assert faster.ratio == pytest.approx(100 / 95) and faster.label == BETTER


def test_one_repetition_gives_no_interval() -> None:
    verdict = judge([105.0], [100.0], AGGREGATE, (128, 1))
    assert verdict.interval is None and verdict.label == "n<2"


def test_the_report_finds_the_known_effects_and_lists_the_failed_arm(tmp_path: Path) -> None:
    tune_example.write(tmp_path, tune_example.EXAMPLE)
    collected = collect(tmp_path)
    assert "gpu-0.95" not in collected.runs
    assert {f.arm for f in collected.failures} == {"gpu-0.95"}
    ranked = compare(collected.runs, baseline=BASELINE, price_per_hour=0.6)
    by_name = {v.name: v for v in ranked}
    assert ranked[1].name == "batched-tokens-8192"
    assert by_name["batched-tokens-8192"].count(BETTER) == 4
    assert by_name["bucket-padding-128"].count(BETTER) == 0
    assert by_name["bucket-padding-128"].count(NOISY) == 4
    assert by_name["max-model-len-65536"].count(BETTER) == 0
    path = write_report(tmp_path, baseline=BASELINE, price_per_hour=0.6)
    text = path.read_text(encoding="utf-8")
    assert "| - | gpu-0.95 | failed to boot |" in text
    assert "RuntimeProgramAllocationFailure" in text
    best = by_name["batched-tokens-8192"].best_tok_s
    assert best is not None
    assert best == pytest.approx(facts.AGGREGATE_TOK_S[(128, 16)] * 1.05)
    assert f"${0.6 / (best * 3600) * 1e6:.3f}" in text
    assert sorted(p.name for p in tmp_path.glob("tune-ratio-ctx*.png")) == [
        "tune-ratio-ctx1024.png",
        "tune-ratio-ctx128.png",
    ]


def test_arms_on_different_images_are_flagged(tmp_path: Path) -> None:
    tune_example.write(tmp_path, {"baseline": Effect(1, 0.01), "a": Effect(1.05, 0.01)})
    for f in (tmp_path / "a").rglob("*.json"):
        rec = json.loads(f.read_text())
        if "tpudeploy_image" in rec:
            rec["tpudeploy_image"] = "vllm/vllm-tpu@sha256:" + "1" * 64
            f.write_text(json.dumps(rec))
    text = write_report(tmp_path, baseline=BASELINE, price_per_hour=None, plots=False).read_text()
    assert "the arms ran on different images" in text and "make pin" in text


def test_the_docs_example_is_what_the_code_reports(tmp_path: Path) -> None:
    doc = tune_example.DOC.read_text(encoding="utf-8")
    start = doc.index(tune_example.BEGIN) + len(tune_example.BEGIN)
    shown = doc[start : doc.index(tune_example.END)].strip()
    assert "synthetic" in doc[: doc.index(tune_example.BEGIN)].lower()
    assert shown == tune_example.example_markdown(tmp_path).strip(), (
        "docs/tuning.md's example is stale: python -m tools.tune_example"
    )
    readme = tune_example.README.read_text(encoding="utf-8")
    start = readme.index(tune_example.README_BEGIN) + len(tune_example.README_BEGIN)
    ranked = readme[start : readme.index(tune_example.README_END)].strip()
    assert "synthetic" in readme[: readme.index(tune_example.README_BEGIN)].lower()
    assert ranked == tune_example.ranked_table(shown).strip(), (
        "README.md's example ranking is stale: python -m tools.tune_example"
    )


# ---- the runner ---------------------------------------------------------------------------


class FakeMake:
    """Stands in for `make destroy/deploy/wait/accept/bench`: records every call, writes the
    sweep's results from known effects, fails `make wait` for the arms whose effect fails and
    `make accept` with the output given in `rejects` (arm -> what make accept printed)."""

    def __init__(
        self,
        effects: Mapping[str, Effect],
        *,
        stop_at: int | None = None,
        rejects: Mapping[str, str] | None = None,
    ) -> None:
        self.effects = effects
        self.calls: list[tuple[str, str]] = []
        self.stop_at = stop_at
        self.deployed: str | None = None
        self.rejects = rejects or {}

    def __call__(self, argv: Sequence[str], env: Mapping[str, str]) -> StepResult:
        target = argv[1]
        arm = Path(env["DEPLOY_CONFIG"]).stem
        self.calls.append((target, arm))
        if self.stop_at is not None and len(self.calls) == self.stop_at:
            raise KeyboardInterrupt
        if target == "deploy":
            self.deployed = arm
        if target == "destroy":
            self.deployed = None
        if target == "wait" and self.effects[arm].fails:
            return StepResult(1, "boot failed: RuntimeProgramAllocationFailure (fake)")
        if target == "accept" and arm in self.rejects:
            return StepResult(1, self.rejects[arm])
        if target == "bench":
            out = Path(next(a for a in argv if a.startswith("OUT="))[4:])
            round_ = int(out.name.removeprefix("round-"))
            out.mkdir(parents=True, exist_ok=True)
            for ctx, c in ((128, 1), (128, 16)):
                rec = tune_example.record(ctx, c, 1, self.effects[arm], arm, round_)
                (out / f"ctx{ctx}-c{c}-r1.json").write_text(json.dumps(rec))
        return StepResult(0, "")


EFFECTS = {
    BASELINE: Effect(1.0, 0.01),
    "batched-tokens-8192": Effect(1.05, 0.01),
    "bucket-padding-128": Effect(1.0, 0.01, fails=True),
}


def small_plan(rounds: int = 2):  # type: ignore[no-untyped-def]
    loaded = arms(only=["batched-tokens-8192", "bucket-padding-128"])
    return build_plan(loaded, profile="quick", rounds=rounds)


def test_every_unit_boots_from_scratch_and_billing_stops_at_the_end(tmp_path: Path) -> None:
    plan = small_plan()
    make = FakeMake(EFFECTS)
    outcomes = run_tune(plan, tmp_path, step=make, log=open("/dev/null", "w"))  # noqa: SIM115
    units = [c for c in make.calls]
    # Each unit: destroy (never patched in place), deploy, wait, the boot check's record,
    # accept, bench; a failed wait skips the rest.
    assert units[:6] == [
        ("destroy", BASELINE),
        ("deploy", BASELINE),
        ("wait", BASELINE),
        ("boot-record", BASELINE),
        ("accept", BASELINE),
        ("bench", BASELINE),
    ]
    assert units[-1][0] == "destroy" and make.deployed is None
    assert ("bench", "bucket-padding-128") not in units
    assert sorted(outcomes) == sorted(
        [(r, n, "failed" if n == "bucket-padding-128" else "done") for r, n in plan.order]
    )
    failed = json.loads(status_path(tmp_path, "bucket-padding-128", 1).read_text())
    assert failed["status"] == "failed" and failed["step"] == "wait"
    assert "RuntimeProgramAllocationFailure" in failed["reason"]


def test_a_stopped_tune_resumes_where_it_stopped(tmp_path: Path) -> None:
    plan = small_plan()
    first = FakeMake(EFFECTS, stop_at=8)  # the second unit's deploy: a stop between arms
    with pytest.raises(KeyboardInterrupt):
        run_tune(plan, tmp_path, step=first, log=open("/dev/null", "w"))  # noqa: SIM115
    done_first = {(r, n) for r, n in plan.order if status_path(tmp_path, n, r).exists()}
    assert done_first == {plan.order[0]}
    second = FakeMake(EFFECTS)
    run_tune(plan, tmp_path, step=second, log=open("/dev/null", "w"))  # noqa: SIM115
    benched = [arm for target, arm in second.calls if target == "bench"]
    first_arm = plan.order[0][1]
    # The finished unit is not run again; the interrupted one and all after it are.
    assert benched.count(first_arm) == 1
    assert all(status_path(tmp_path, n, r).exists() for r, n in plan.order)
    report = write_report(tmp_path, baseline=BASELINE, price_per_hour=None, plots=False).read_text()
    assert "| 1 | batched-tokens-8192 | 2 |" in report


def test_an_interrupted_units_partial_results_are_set_aside(tmp_path: Path) -> None:
    plan = small_plan(rounds=1)
    first_round, first_arm = plan.order[0]
    make = FakeMake(EFFECTS, stop_at=6)  # inside the first unit's bench, before its status
    with pytest.raises(KeyboardInterrupt):
        run_tune(plan, tmp_path, step=make, log=open("/dev/null", "w"))  # noqa: SIM115
    partial = tmp_path / first_arm / f"round-{first_round}"
    partial.mkdir(parents=True, exist_ok=True)
    (partial / "half.json").write_text("{}")
    run_tune(plan, tmp_path, step=FakeMake(EFFECTS), log=open("/dev/null", "w"))  # noqa: SIM115
    kept = tmp_path / first_arm / f"round-{first_round}.interrupted-1" / "half.json"
    assert kept.exists()


def test_a_changed_arm_is_refused_on_resume(tmp_path: Path) -> None:
    plan = small_plan(rounds=1)
    run_tune(plan, tmp_path, step=FakeMake(EFFECTS), log=open("/dev/null", "w"))  # noqa: SIM115
    changed = build_plan(
        arms(
            {"vllm": {"slice_rope_cache": True}}, only=["batched-tokens-8192", "bucket-padding-128"]
        ),
        profile="quick",
        rounds=1,
    )
    with pytest.raises(TuneError, match="changed since this run started"):
        run_tune(changed, tmp_path, step=FakeMake(EFFECTS), log=open("/dev/null", "w"))  # noqa: SIM115


def test_keep_leaves_the_node_on_the_chosen_arm(tmp_path: Path) -> None:
    plan = small_plan(rounds=1)
    make = FakeMake(EFFECTS)
    run_tune(plan, tmp_path, step=make, log=open("/dev/null", "w"), keep="batched-tokens-8192")  # noqa: SIM115
    assert make.calls[-1] == ("deploy", "batched-tokens-8192")
    with pytest.raises(TuneError, match="not an arm"):
        run_tune(plan, tmp_path, step=FakeMake(EFFECTS), log=open("/dev/null", "w"), keep="nope")  # noqa: SIM115


# ---- the command line ---------------------------------------------------------------------


def test_plan_and_report_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tpudeploy.tune.__main__ import main

    config = tmp_path / "deploy.toml"
    config.write_text("", encoding="utf-8")
    assert (
        main(["plan", "--config", str(config), "--profile", "quick", "--arms", "ngram-speculative"])
        == 0
    )
    out = capsys.readouterr().out
    assert "+ --speculative-config" in out and "round 3" in out
    results = tune_example.write(
        tmp_path / "out", {"baseline": Effect(1, 0.01), "ngram-speculative": Effect(1.05, 0.01)}
    )
    assert main(["report", str(results), "--config", str(config)]) == 0
    assert "| 1 | ngram-speculative | 4 |" in capsys.readouterr().out


def test_run_refuses_without_confirmation_and_bad_arms_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from tpudeploy.tune.__main__ import main

    config = tmp_path / "deploy.toml"
    config.write_text("", encoding="utf-8")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["run", "--config", str(config), "--out", str(tmp_path / "o")]) == 2
    assert "make tune AUTO_APPROVE=1" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    bad = tmp_path / "arms"
    write_arm(bad, "x", "[vllm]\nmax_model_len = 1\n")
    assert main(["plan", "--config", str(config), "--arms-dir", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err and "no [arm] description" in err
