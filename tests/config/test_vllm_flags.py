"""[vllm] extra_args against the pinned vLLM's CLI (issue 22 item 4, issue 23 item 7): the flag
list generated from vLLM's source, the allow-list, and where extra_args land on the serve line."""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path

import pytest

from tools import vllm_bench_flags, vllm_flags
from tpudeploy.bench.commands import Cell, bench_argv
from tpudeploy.bench.settings import SweepSettings
from tpudeploy.benchcli import _settings
from tpudeploy.config import ConfigError, parse_config, serveflags
from tpudeploy.config.serveflags import (
    ALLOWED_EXTRA_FLAGS,
    DENIED_SERVE_FLAGS,
    MODELLED_SERVE_FLAGS,
    VLLM_FLAGS,
    VLLM_VERSION,
    check_extra_args,
    served_model_name,
)
from tpudeploy.render import vllm_serve_args


def refusal(extra_args: list[str]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config({"vllm": {"extra_args": extra_args}})
    (problem,) = [p for p in info.value.problems if p.startswith("vllm.extra_args = ")]
    return problem


@pytest.mark.parametrize(
    ("extra_args", "item", "reason", "fix"),
    [
        # The bypass: a bare value extended --allowed-media-domains past the host check.
        (["--max-num-seqs", "128", "169.254.169.254"], 2, "a value with no flag", "right after"),
        (["localhost"], 0, "a value with no flag", "right after the flag"),
        (["oops"], 0, "a value with no flag", "right after the flag"),
        (["--no-such-flag"], 0, "not a `vllm serve` flag in vLLM 0.33.0", "remove it"),
        (["--max-num-seq", "8"], 0, "not a `vllm serve` flag", "did you mean --max-num-seqs?"),
        (["--tool-parser-plugin", "/x.py"], 0, "imports a Python file", "remove it"),
        (["--middleware", "m.App"], 0, "imports a Python object", "remove it"),
        (["--enable-prompt-embeds"], 0, "raw tensors", "remove it"),
        (["--kv-events-config", "{}"], 0, "ZMQ socket", "remove it"),
        (["--download-dir", "/d"], 0, "not on the extra_args allow-list", "ALLOWED_EXTRA_FLAGS"),
        (["--scheduling-policy", "lifo"], 0, "one of fcfs, priority", "listed values"),
        (["--scheduling-policy=lifo"], 0, "one of fcfs, priority", "listed values"),
        (["--max-num-seqs"], 0, "needs a value", "--max-num-seqs VALUE"),
        (["--max-num-seqs", "--seed", "1"], 0, "needs a value", "--max-num-seqs VALUE"),
        (["--disable-log-stats=1"], 0, "takes no value", "--disable-log-stats alone"),
        (["--no-max-num-seqs", "4"], 0, "no --no- form of --max-num-seqs", "write --max-num-seqs"),
        (["--no-disable-log-stats"], 0, "no --no- form", "remove it"),
        (["--", "gemma"], 0, "ends vLLM's options", "remove it"),
        (["-q", "fp8"], 0, "a short or bare option", "full --name"),
        (["--seed", "1", "2"], 2, "a value with no flag", "right after"),
        # Modelled ([vllm] speculative_config, n-gram only): validated there, never twice.
        (
            ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}'],
            0,
            "its own config key, vllm.speculative_config",
            "remove it from extra_args",
        ),
        (["--speculative-config.method", "ngram"], 0, "vllm.speculative_config", "remove it"),
    ],
)
def test_extra_args_vllm_would_refuse_or_that_widen_a_guard_are_refused(
    extra_args: list[str], item: int, reason: str, fix: str
) -> None:
    problem = refusal(extra_args)
    head, _, said_fix = problem.partition(". Fix: ")
    assert f"item {item}, {extra_args[item]!r}: " in head
    assert reason in head
    assert fix in said_fix


@pytest.mark.parametrize(
    "extra_args",
    [
        ["--max-num-seqs", "128"],
        ["--max-num-seqs=128", "--seed", "-1"],
        ["--served-model-name", "gemma", "agents", "--async-scheduling"],
        ["--no-enable-chunked-prefill", "--scheduling-policy", "priority"],
        ["--max_num_seqs", "64"],
    ],
)
def test_allowed_flags_spelled_the_way_vllm_takes_them_pass(extra_args: list[str]) -> None:
    assert parse_config({"vllm": {"extra_args": extra_args}}).vllm.extra_args == tuple(extra_args)


def test_extra_args_come_before_every_modelled_flag_on_the_serve_line() -> None:
    """Nothing after extra_args can be extended by them, and the modelled flags win over any
    repeat (vLLM takes the last occurrence)."""
    v = parse_config(
        {"vllm": {"extra_args": ["--served-model-name", "gemma", "agents", "--max-num-seqs", "8"]}}
    ).vllm
    argv = vllm_serve_args(v)
    assert argv[:8] == ["vllm", "serve", v.model, *v.extra_args]
    assert argv[8] == "--host"
    assert argv[-2:] == ["--allowed-media-domains", *v.allowed_media_domains]


def test_every_listed_flag_exists_in_the_pinned_vllm() -> None:
    """The allow-list, the deny list and the modelled flags name flags of vLLM 0.33.0's CLI."""
    assert VLLM_VERSION == "0.33.0"
    missing = (ALLOWED_EXTRA_FLAGS | set(DENIED_SERVE_FLAGS) | MODELLED_SERVE_FLAGS) - set(
        VLLM_FLAGS
    )
    assert not missing
    assert not ALLOWED_EXTRA_FLAGS & (set(DENIED_SERVE_FLAGS) | MODELLED_SERVE_FLAGS)
    # The media list is the flag whose nargs made a bare value dangerous.
    assert VLLM_FLAGS["--allowed-media-domains"]["nargs"] == "+"
    # The seed: int8 is not a KV dtype; the choices vLLM enforces for --dtype include bfloat16.
    assert "bfloat16" in VLLM_FLAGS["--dtype"]["choices"]


def test_the_modelled_flags_render_as_the_pinned_vllm_takes_them() -> None:
    argv = vllm_serve_args(parse_config({}).vllm)[3:]
    i = 0
    while i < len(argv):
        flag = argv[i]
        name = "--" + flag[5:] if flag.startswith("--no-") else flag
        spec = VLLM_FLAGS[name]
        if flag.startswith("--no-") or not spec["value"]:
            assert flag == name or spec.get("negatable"), flag
            i += 1
            continue
        values = []
        i += 1
        while i < len(argv) and not argv[i].startswith("--"):
            values.append(argv[i])
            i += 1
        assert len(values) == 1 or (spec.get("nargs") == "+" and values), flag
        assert not spec.get("choices") or set(values) <= set(spec["choices"]), flag


def test_smoke_and_bench_use_the_served_name() -> None:
    """Issue 23 item 7: --served-model-name passed the check and then broke smoke and bench."""
    cfg = parse_config({"vllm": {"extra_args": ["--served-model-name", "agents", "other"]}})
    assert cfg.vllm.served_model_name == "agents"
    assert parse_config({}).vllm.served_model_name == parse_config({}).vllm.model
    assert (
        parse_config({"vllm": {"extra_args": ["--served-model-name=x"]}}).vllm.served_model_name
        == "x"
    )


def test_bench_sends_the_served_name_and_loads_the_tokenizer_by_model(tmp_path: Path) -> None:
    path = tmp_path / "deploy.toml"
    path.write_text('[vllm]\nextra_args = ["--served-model-name", "agents"]\n')
    args = argparse.Namespace(
        config=str(path),
        container=None,
        profile=None,
        max_model_len=None,
        route="replica",
        shared_prefix_percent=0,
    )
    _, settings, _ = _settings(args)
    argv = bench_argv(settings, Cell(128, 1, 1, 7), result_dir="/r")
    assert argv[argv.index("--model") + 1] == "google/gemma-4-E2B-it"
    assert argv[argv.index("--served-model-name") + 1] == "agents"
    path.write_text("[vllm]\n")
    _, settings, _ = _settings(args)
    assert "--served-model-name" not in bench_argv(settings, Cell(128, 1, 1, 7), result_dir="/r")


def test_the_generator_reads_vllms_rules_from_source(tmp_path: Path) -> None:
    """tools/vllm_flags.py on a small tree shaped like vLLM's: get_kwargs' rules per type, the
    explicit keywords of add_argument, and FrontendArgs' per-field flags and edits."""
    (tmp_path / "vllm/config").mkdir(parents=True)
    (tmp_path / "vllm/engine").mkdir()
    (tmp_path / "vllm/entrypoints/common").mkdir(parents=True)
    (tmp_path / "vllm/config/cache.py").write_text(
        textwrap.dedent(
            """
            CacheDType = Literal["auto", "fp8"]
            @config
            class CacheConfig:
                cache_dtype: CacheDType = "auto"
                free_dtype: CacheDType | str = "auto"
                enable_prefix_caching: bool = True
                sizes: list[int] | None = None
                pair: tuple[int, int] = (1, 2)
                block_size: int | None = None
            """
        )
    )
    (tmp_path / "vllm/engine/arg_utils.py").write_text(
        textwrap.dedent(
            """
            class EngineArgs:
                @staticmethod
                def add_cli_args(parser):
                    cache_kwargs = get_kwargs(CacheConfig)
                    del cache_kwargs["sizes"]["nargs"]
                    g = parser.add_argument_group()
                    g.add_argument("--kv-cache-dtype", **cache_kwargs["cache_dtype"])
                    g.add_argument("--free-dtype", **cache_kwargs["free_dtype"])
                    g.add_argument("--enable-prefix-caching",
                                   **{**cache_kwargs["enable_prefix_caching"], "default": None})
                    g.add_argument("--sizes", **cache_kwargs["sizes"])
                    g.add_argument("--pair", **cache_kwargs["pair"])
                    g.add_argument("--block-size", "-b", **cache_kwargs["block_size"])
                    g.add_argument("--quiet", action="store_true")
                    g.add_argument("--level", choices=["a", "b"])
            """
        )
    )
    (tmp_path / "vllm/entrypoints/common/cli_args.py").write_text(
        textwrap.dedent(
            """
            @config
            class BaseFrontendArgs:
                tool_parser_plugin: str = ""
            @config
            class FrontendArgs(BaseFrontendArgs):
                allowed_origins: list[str] = field(default_factory=list)
                middleware: list[str] = field(default_factory=list)
                api_key: list[str] | None = None
                @classmethod
                def _customize_cli_kwargs(cls, frontend_kwargs):
                    del frontend_kwargs["allowed_origins"]["nargs"]
                    frontend_kwargs["middleware"]["action"] = "append"
                    return frontend_kwargs
            def make_arg_parser(parser):
                parser.add_argument("--headless", action="store_true")
                parser.add_argument("--config")
            """
        )
    )
    got = vllm_flags.flags(tmp_path)
    assert got == {
        "--allowed-origins": {"value": True},
        "--api-key": {"value": True, "nargs": "+"},
        "--block-size": {"value": True},
        "--config": {"value": True},
        "--enable-prefix-caching": {"value": False, "negatable": True},
        "--free-dtype": {"value": True},
        "--headless": {"value": False},
        "--kv-cache-dtype": {"value": True, "choices": ["auto", "fp8"]},
        "--level": {"value": True, "choices": ["a", "b"]},
        "--middleware": {"value": True},
        "--pair": {"value": True, "nargs": 2},
        "--quiet": {"value": False},
        "--sizes": {"value": True},
        "--tool-parser-plugin": {"value": True},
    }


def test_the_committed_flag_list_names_the_command_that_made_it() -> None:
    document = json.loads(
        (Path(__file__).resolve().parents[2] / "tpudeploy/config/vllm_cli_flags.json").read_text()
    )
    assert document["generated_by"].startswith("python -m tools.vllm_flags ")
    assert len(document["flags"]) > 250


@pytest.mark.parametrize(
    ("extra_args", "served"),
    [
        ((), "google/gemma-4-E2B-it"),
        (("--served-model-name", "gemma"), "gemma"),
        (("--served-model-name=gemma=v2",), "gemma=v2"),  # the name is all after the first =
        (("--seed", "1", "--served-model-name", "a", "--served-model-name", "b"), "a"),
        (("--served-model-name",), "google/gemma-4-E2B-it"),  # no value: vLLM's own name
    ],
)
def test_the_name_clients_send_is_the_first_served_model_name(
    extra_args: tuple[str, ...], served: str
) -> None:
    assert served_model_name("google/gemma-4-E2B-it", extra_args) == served


NEEDS_FLAG = "put it right after the flag it belongs to (e.g. --max-num-seqs 128)"
POLICY = "--scheduling-policy takes one of fcfs, priority, not 'fifo'; use one of the listed values"
LOG_LEVELS = "critical, debug, error, info, trace, warning"


@pytest.mark.parametrize(
    ("extra_args", "said"),
    [
        (
            ("--",),
            "item 0, '--': ends vLLM's options: what follows is read as the model; remove it",
        ),
        (
            ("--seed=1", "--"),
            "item 1, '--': ends vLLM's options: what follows is read as the model",
        ),
        (
            ("-x",),
            "item 0, '-x': a short or bare option; write the flag's full --name from vLLM's CLI",
        ),
        (("--seed", "1", "-x"), "item 2, '-x': a short or bare option"),
        (("-",), f"item 0, '-': a value with no flag before it; {NEEDS_FLAG}"),
        (("-1",), f"item 0, '-1': a value with no flag before it; {NEEDS_FLAG}"),
        (("--seed", "1", "2"), f"item 2, '2': a value with no flag before it; {NEEDS_FLAG}"),
        (
            ("--max-num-seq", "1"),
            "item 0, '--max-num-seq': --max-num-seq is not a `vllm serve` flag in vLLM 0.33.0; "
            "did you mean --max-num-seqs?",
        ),
        # The closest flag vLLM has, allowed here or not: the user learns the spelling first.
        (("--enforce-eagr",), "vLLM 0.33.0; did you mean --enforce-eager?"),
        (("--zzzzqqqq",), "flag in vLLM 0.33.0; remove it from extra_args"),
        (("--scheduling-policy=fifo",), f"item 0, '--scheduling-policy=fifo': {POLICY}"),
        (("--scheduling-policy", "fifo"), f"item 0, '--scheduling-policy': {POLICY}"),
        (("--async_scheduling", "--scheduling-policy", "fifo"), "item 1, '--scheduling-policy':"),
        # A dot in the value is not a JSON config's key: the value is still checked.
        (("--scheduling-policy=fcfs.x",), "takes one of fcfs, priority, not 'fcfs.x'"),
        (
            ("--scheduling-policy=fcfs=x",),
            "--scheduling-policy takes one of fcfs, priority, not 'fcfs=x'",
        ),
        (
            ("--num-gpu-blocks-override=5", "--uvicorn-log-level=x=y"),
            f"item 1, '--uvicorn-log-level=x=y': --uvicorn-log-level takes one of {LOG_LEVELS}, "
            "not 'x=y'; use one of the listed values",
        ),
        (
            ("--logprobs-mode=raw_logits", "--uvicorn-log-level", "loud"),
            f"item 1, '--uvicorn-log-level': --uvicorn-log-level takes one of {LOG_LEVELS}, "
            "not 'loud'",
        ),
        (
            ("--no-disable-log-stats",),
            "vLLM has no --no- form of --disable-log-stats; remove it, or write "
            "--disable-log-stats",
        ),
        (("--no_disable-log-stats",), "vLLM has no --no- form of --disable-log-stats"),
        (
            ("--disable-log-stats=1",),
            "--disable-log-stats takes no value; write --disable-log-stats alone",
        ),
        (("--seed",), "--seed needs a value; put its value in the next item (--seed VALUE)"),
        (("--served-model-name", "a", "b", "--zzzzqqqq"), "item 3, '--zzzzqqqq':"),
        # A dotted key is one key of a JSON table, one value (vllm/utils/argparse_utils.py):
        # vLLM passes --x '{"key": v}' on, which no option with choices takes.
        (
            ("--scheduling-policy.x=fcfs",),
            "item 0, '--scheduling-policy.x=fcfs': --scheduling-policy takes one of fcfs, "
            "priority, and vLLM reads --scheduling-policy.x as a JSON table, which is none of "
            "them; write --scheduling-policy VALUE",
        ),
        (("--uvicorn-log-level.a", "info"), "item 0, '--uvicorn-log-level.a': "),
        (
            ("--served-model-name.alias", "a", "b"),
            f"item 2, 'b': a value with no flag before it; {NEEDS_FLAG}",
        ),
    ],
)
def test_each_refused_extra_arg_is_named_with_the_fix(
    extra_args: tuple[str, ...], said: str
) -> None:
    with pytest.raises(ValueError) as info:
        check_extra_args(extra_args)
    assert said in str(info.value)


@pytest.mark.parametrize(
    "extra_args",
    [
        ("--served-model-name", "a", "b", "--seed", "1"),  # nargs "+": both are names
        ("--seed", "-1"),  # a negative number is a value
        ("--no_async_scheduling",),  # vLLM reads _ as -
        # One key of a JSON config: the value is the key's, not the flag's.
        ("--override-generation-config.temperature=x", "--seed", "1"),
        ("--override-generation-config.temperature", "x", "--seed", "1"),
    ],
)
def test_what_vllm_takes_passes(extra_args: tuple[str, ...]) -> None:
    assert check_extra_args(extra_args) == extra_args


def test_a_flag_of_fixed_arity_takes_exactly_its_number_of_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """tools/vllm_flags.py writes nargs N for an option typed as a tuple of N (none in vLLM
    0.33.0's CLI: its multi-value options are all nargs "+"); argparse takes exactly N values
    and refuses fewer. A flag table of one such option, as a regenerated list could hold."""
    monkeypatch.setattr(serveflags, "VLLM_FLAGS", {"--pair": {"value": True, "nargs": 2}})
    monkeypatch.setattr(serveflags, "ALLOWED_EXTRA_FLAGS", frozenset({"--pair"}))
    assert check_extra_args(("--pair", "1", "2")) == ("--pair", "1", "2")
    with pytest.raises(ValueError, match=r"item 3, '3': a value with no flag before it"):
        check_extra_args(("--pair", "1", "2", "3"))
    with pytest.raises(ValueError, match=r"item 0, '--pair': --pair takes 2 values, not 1; give"):
        check_extra_args(("--pair", "1"))


def test_a_token_in_extra_args_is_refused_wherever_it_stands_and_never_shown() -> None:
    token = "hf_" + "a" * 34
    with pytest.raises(ValueError) as info:
        check_extra_args(("--seed", token))
    assert str(info.value) == (
        "item 1, '<redacted: a Hugging Face token>': looks like a Hugging Face token, and "
        "extra_args land in instance metadata, Terraform state and the process list (secrets "
        "belong in Secret Manager); remove it from extra_args"
    )


BENCH_FLAGS_FILE = Path(__file__).resolve().parents[2] / "tpudeploy/bench/vllm_bench_flags.json"


def _bench_problems(argv: list[str], flags: dict[str, dict[str, bool]]) -> list[str]:
    """What `vllm bench serve`'s parser would refuse in argv: a flag it lacks, or a value flag
    with no value after it (--metadata takes any number of values: nargs "*")."""
    out, i = [], argv.index("serve") + 1
    while i < len(argv):
        flag = argv[i]
        if flag not in flags:
            out.append(f"{flag}: not a flag of vllm bench serve")
        elif flags[flag]["value"]:
            if flag == "--metadata":
                while i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                    i += 1
            elif i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                out.append(f"{flag}: needs a value")
            else:
                i += 1
        i += 1
    return out


def test_every_bench_serve_argv_we_build_is_one_the_pinned_vllm_takes() -> None:
    """Issue 26: the sweep's argv in each shape it takes (one replica; through the Gateway with
    a shared prefix; a served name; detailed results) against `vllm bench serve`'s flags, read
    from the same vLLM release's source as the serve flags."""
    document = json.loads(BENCH_FLAGS_FILE.read_text())
    assert document["vllm_version"] == VLLM_VERSION
    flags = document["flags"]
    shapes = [
        SweepSettings(),
        SweepSettings(
            base_url="https://10.0.0.9",
            scoring="random",
            replicas=3,
            shared_prefix_percent=75,
            served_model_name="agents",
            save_detailed=True,
            config_hash="abc",
        ),
    ]
    for settings in shapes:
        argv = bench_argv(
            settings,
            Cell(1024, 16, 1, 7),
            result_dir="/r",
            image_id="i",
            digest="d",
            vllm_version="v",
        )
        assert _bench_problems(argv, flags) == [], argv
    # The check refuses what vLLM's parser would.
    assert _bench_problems(["serve", "--no-such", "--seed"], flags) == [
        "--no-such: not a flag of vllm bench serve",
        "--seed: needs a value",
    ]


def test_the_bench_flag_generator_follows_add_cli_args_only(tmp_path: Path) -> None:
    (tmp_path / "vllm/benchmarks/datasets").mkdir(parents=True)
    (tmp_path / "vllm/benchmarks/serve.py").write_text(
        textwrap.dedent(
            """
            def add_cli_args(parser):
                add_dataset_parser(parser)
                parser.add_argument("--base-url", type=str)
                parser.add_argument("--insecure", action="store_true")
                group = parser.add_argument_group("g")
                group.add_argument("--top-k", type=int)

            def other_benchmark(parser):
                parser.add_argument("--not-for-serve")
            """
        )
    )
    (tmp_path / "vllm/benchmarks/datasets/datasets.py").write_text(
        textwrap.dedent(
            """
            def add_dataset_parser(parser):
                _random_args(parser)

            def _random_args(p):
                p.add_argument("--random-prefix-len", type=int, default=0)
                p.add_argument("--flag", action=argparse.BooleanOptionalAction)
            """
        )
    )
    assert vllm_bench_flags.read(tmp_path) == {
        "--base-url": {"value": True},
        "--flag": {"value": False},
        "--insecure": {"value": False},
        "--random-prefix-len": {"value": True},
        "--top-k": {"value": True},
    }
