"""Config model: the seed's values are the defaults, and every bad input gets a clear error."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import cli_fork
from tpudeploy.config import (
    CONFIG_ENV,
    IAP_SSH_RANGE,
    ConfigError,
    DeployConfig,
    load_config,
    parse_config,
    require_project,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str, name: str = "deploy.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _hermetic_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GOOGLE_CLOUD_PROJECT", CONFIG_ENV)}
    env.update(extra)
    return env


# --- defaults are the seed ---------------------------------------------------------------------


def test_defaults_are_the_seeds_machine() -> None:
    cfg = parse_config({})
    # gcloud spelling of one v5e chip and its runtime; flex-start's only zone.
    assert cfg.zone == "us-west4-a"
    assert cfg.effective_region == "us-west4"
    assert cfg.accelerator_type == "v5litepod-1"
    assert cfg.runtime_version == "v2-alpha-tpuv5-lite"
    assert cfg.project == ""
    # Nothing public by default: no vLLM ingress, but a reachable node (the seed SSHes to its IP).
    assert cfg.network.allowed_cidrs == ()
    assert cfg.network.allow_public_endpoint is False
    assert IAP_SSH_RANGE == "35.235.240.0/20"


def test_defaults_are_the_seeds_docker_run() -> None:
    v = parse_config({}).vllm
    # docker run -d --name vllm-gemma4 ... --shm-size 10gb ... vllm/vllm-tpu:nightly
    assert v.image == "vllm/vllm-tpu:nightly"
    assert v.container_name == "vllm-gemma4"
    assert v.shm_size == "10gb"
    assert v.port == 8000
    # vllm serve google/gemma-4-E2B-it and every flag of the seed's command
    assert v.model == "google/gemma-4-E2B-it"
    assert v.dtype == "bfloat16"
    assert v.kv_cache_dtype == "auto"
    assert v.max_model_len == 32768
    assert v.max_num_batched_tokens == 4096
    assert v.tensor_parallel_size == 1
    assert v.gpu_memory_utilization == 0.92
    assert v.enable_prefix_caching is True
    assert v.disable_chunked_mm_input is True
    assert v.limit_mm_per_prompt == {"image": 4, "audio": 1}
    assert v.enable_auto_tool_choice is True
    assert v.tool_call_parser == "gemma4"
    assert v.reasoning_parser == "gemma4"
    assert v.extra_args == ()
    # tpu-inference environment: the engine's own defaults, so nothing is set in the container.
    assert v.tpu_inference_env() == {}


def test_tpu_inference_env_writes_ints_not_booleans() -> None:
    v = parse_config(
        {"vllm": {"num_precompile_workers": 4, "vllm_xla_check_recompilation": True}}
    ).vllm
    # DESIGN: VLLM_XLA_CHECK_RECOMPILATION is parsed with bool(int(...)): "true" would crash.
    assert v.tpu_inference_env() == {
        "NUM_PRECOMPILE_WORKERS": "4",
        "VLLM_XLA_CHECK_RECOMPILATION": "1",
    }


def test_derived_names_are_deterministic() -> None:
    cfg = parse_config({"name": "agents-a"})
    assert cfg.node_id == "agents-a"
    assert cfg.service_account_id == "agents-a-node"
    assert cfg.hf_token_secret_id == "agents-a-hf-token"  # noqa: S105 - an id, not a value
    assert cfg.network_tag == "agents-a-vllm"
    assert (cfg.secrets_stack_name, cfg.node_stack_name) == ("agents-a-secrets", "agents-a-node")
    assert parse_config({"name": "agents-a"}) == cfg


def test_empty_file_gives_the_seeds_deployment(tmp_path: Path) -> None:
    assert load_config(_write(tmp_path, "")) == parse_config({}) == DeployConfig()


def test_committed_deploy_toml_is_valid() -> None:
    cfg = load_config(REPO_ROOT / "deploy.toml")
    assert cfg.accelerator_type == "v5litepod-1"


def test_deploy_config_env_selects_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = _write(tmp_path, 'name = "other-one"\nzone = "us-west4-a"\n', "other.toml")
    monkeypatch.setenv(CONFIG_ENV, str(other))
    assert load_config().name == "other-one"


def test_default_path_is_deploy_toml_in_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, 'name = "from-cwd"\n')
    assert load_config().name == "from-cwd"


def test_google_cloud_project_fills_an_unset_project(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-project-1")
    assert parse_config({}).project == "env-project-1"
    # An explicit project wins over the environment.
    assert parse_config({"project": "file-project-1"}).project == "file-project-1"


def test_public_endpoint_is_accepted_with_the_opt_in() -> None:
    cfg = parse_config({"network": {"allowed_cidrs": ["0.0.0.0/0"], "allow_public_endpoint": True}})
    assert cfg.network.allowed_cidrs == ("0.0.0.0/0",)


def test_valid_cidrs_are_kept_in_order() -> None:
    cidrs = ["203.0.113.0/24", "198.51.100.7/32", "2001:db8::/48"]
    assert parse_config({"network": {"allowed_cidrs": cidrs}}).network.allowed_cidrs == tuple(cidrs)


# --- every bad input names the key, the value and the fix --------------------------------------

# (TOML text, the key named, the value named, something the fix must say); id = the case.
BAD_INPUTS = [
    pytest.param(
        'zonee = "us-west4-a"\n',
        "zonee",
        "'us-west4-a'",
        "did you mean 'zone'",
        id="unknown-key",
    ),
    pytest.param(
        '[vllm]\nshm_sise = "10gb"\n',
        "vllm.shm_sise",
        "'10gb'",
        "did you mean 'shm_size'",
        id="unknown-nested-key",
    ),
    pytest.param(
        '[vllm]\nmax_model_len = "32768"\n',
        "vllm.max_model_len",
        "'32768'",
        "32768",
        id="wrong-type",
    ),
    pytest.param(
        'network = "default"\n',
        "network",
        "'default'",
        "[network] as a table",
        id="wrong-type-table",
    ),
    pytest.param(
        'accelerator_type = "v5e-1"\n',
        "accelerator_type",
        "'v5e-1'",
        "'v5litepod-1'",
        id="v5e-spelling",
    ),
    pytest.param(
        'runtime_version = "v2-alpha-tpuv6e"\n',
        "runtime_version",
        "'v2-alpha-tpuv6e'",
        'runtime_version = "v2-alpha-tpuv5-lite"',
        id="runtime-other-generation",
    ),
    pytest.param(
        '[network]\nallowed_cidrs = ["10.0.0/24"]\n',
        "network.allowed_cidrs",
        "'10.0.0/24'",
        "203.0.113.0/24",
        id="malformed-cidr",
    ),
    pytest.param(
        '[network]\nallowed_cidrs = ["203.0.113.7/24"]\n',
        "network.allowed_cidrs",
        "'203.0.113.7/24'",
        "host bits zero",
        id="cidr-host-bits",
    ),
    pytest.param(
        '[network]\nallowed_cidrs = ["0.0.0.0/0"]\n',
        "network.allowed_cidrs",
        "0.0.0.0/0",
        "allow_public_endpoint = true",
        id="public-without-opt-in",
    ),
    pytest.param(
        'region = "europe-west4"\n',
        "region",
        "'europe-west4'",
        "'us-west4'",
        id="region-without-zone",
    ),
    pytest.param(
        'name = "Gemma_4"\n',
        "name",
        "'Gemma_4'",
        "gemma4-v5e",
        id="bad-name",
    ),
    pytest.param(
        '[labels]\nTeam = "ml"\n',
        "labels",
        "'Team'",
        "lowercase",
        id="bad-label",
    ),
    pytest.param(
        '[network]\nnetwork = "${file(\\"/etc/hostname\\")}"\n',
        "network.network",
        "${file(",
        "projects/HOST_PROJECT/global/networks/NAME",
        id="network-terraform-expression",
    ),
    pytest.param(
        '[network]\nnetwork = ""\n',
        "network.network",
        "''",
        '"default"',
        id="empty-network",
    ),
    pytest.param(
        '[network]\nsubnetwork = "sub%{ if true }x%{ endif }"\n',
        "network.subnetwork",
        "%{ if true }",
        "regions/REGION/subnetworks/NAME",
        id="subnetwork-terraform-directive",
    ),
    pytest.param(
        '[labels]\ntpudeploy-spec = "x"\n',
        "labels",
        "'tpudeploy-spec'",
        "rename it",
        id="reserved-label-spec",
    ),
    pytest.param(
        '[labels]\ndeployment = "other"\n',
        "labels",
        "'deployment'",
        "rename it",
        id="reserved-label-deployment",
    ),
    pytest.param(
        'provisioning = "preemptible"\n',
        "provisioning",
        "'preemptible'",
        '"spot"',
        id="bad-provisioning",
    ),
]


@pytest.mark.parametrize(("toml", "key", "value", "fix"), BAD_INPUTS)
def test_bad_input_names_key_value_and_fix(
    tmp_path: Path, toml: str, key: str, value: str, fix: str
) -> None:
    path = _write(tmp_path, toml)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    problem = next((p for p in info.value.problems if p.startswith(f"{key} = ")), None)
    assert problem is not None, f"no problem names {key!r}: {message}"
    stated, _, advice = problem.partition(". Fix: ")
    assert value in stated, f"the value {value} is not named: {problem}"
    assert advice.strip(), f"no fix given: {problem}"
    assert fix in advice, f"the fix does not say {fix!r}: {problem}"


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = _write(tmp_path, 'zonee = "x"\naccelerator_type = "v5e-1"\n[vllm]\nport = "8000"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    keys = {p.split(" = ", 1)[0] for p in info.value.problems}
    assert keys == {"zonee", "accelerator_type", "vllm.port"}


def test_invalid_toml_syntax(tmp_path: Path) -> None:
    path = _write(tmp_path, 'zone = "us-west4-a\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    assert "not valid TOML" in message
    assert "line 1" in message  # tomllib's position, so the user finds the typo
    assert "fix the syntax" in message


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    assert "file not found" in message
    assert CONFIG_ENV in message  # the fix: point DEPLOY_CONFIG at an existing file


def test_deploying_requires_a_project() -> None:
    cfg = parse_config({})
    with pytest.raises(ConfigError) as info:
        require_project(cfg, source="deploy.toml")
    (problem,) = info.value.problems
    assert problem.startswith("project = ''")
    assert "GOOGLE_CLOUD_PROJECT" in problem
    assert 'project = "my-project"' in problem
    assert require_project(parse_config({"project": "my-proj-123"})) == "my-proj-123"


def test_check_deploy_exits_2_without_a_project(tmp_path: Path) -> None:
    path = _write(tmp_path, "")
    result = cli_fork.run(
        ["check", "--deploy"],
        env=_hermetic_env(DEPLOY_CONFIG=str(path)),
        timeout=60,
    )
    assert result.returncode == 2, result
    assert "project = ''" in result.stderr
    assert "GOOGLE_CLOUD_PROJECT" in result.stderr
    assert "Traceback" not in result.stderr
    # Synthesizing needs no project: the same file passes `check` without --deploy.
    ok = cli_fork.run(
        ["check"],
        env=_hermetic_env(DEPLOY_CONFIG=str(path)),
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert "v5litepod-1" in ok.stdout


def test_main_py_reports_a_bad_config_without_a_traceback(tmp_path: Path) -> None:
    path = _write(tmp_path, 'accelerator_type = "v5e-1"\n')
    outdir = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "main.py"],
        cwd=REPO_ROOT,
        env=_hermetic_env(DEPLOY_CONFIG=str(path), CDKTF_OUTDIR=str(outdir)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    assert str(path) in result.stderr
    assert "accelerator_type = 'v5e-1'" in result.stderr
    assert "'v5litepod-1'" in result.stderr
    assert not outdir.exists()  # nothing synthesized from a bad config


def test_shared_vpc_paths_are_accepted() -> None:
    net = parse_config(
        {
            "network": {
                "network": "projects/host-proj-1/global/networks/shared",
                "subnetwork": "projects/host-proj-1/regions/us-west4/subnetworks/tpu",
            }
        }
    ).network
    assert net.network == "projects/host-proj-1/global/networks/shared"
    assert net.subnetwork.endswith("/subnetworks/tpu")


# --- issue 13, defect 7: config cannot undo the guards -----------------------------------------


def _problem_for(data: dict[str, object], key: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    problem = next((p for p in info.value.problems if p.startswith(f"{key} = ")), None)
    assert problem is not None, info.value.problems
    assert ". Fix: " in problem, problem
    return problem


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # A repeat of a modelled flag: vLLM takes the last one, so it would win.
        (["--allowed-media-domains", "169.254.169.254"], "vllm.allowed_media_domains"),
        (["--allowed_media_domains=example.com"], "vllm.allowed_media_domains"),
        (["--gpu-memory-utilization", "0.95"], "vllm.gpu_memory_utilization"),
        (["-tp", "4"], "vllm.tensor_parallel_size"),
        (["--no-enable-prefix-caching"], "vllm.enable_prefix_caching"),
        (["--limit-mm-per-prompt.image", "8"], "vllm.limit_mm_per_prompt"),
        # The deny list, in the spellings vLLM's parser accepts (underscores, =, prefixes).
        (["--api-key", "abc"], "TLS proxy checks it"),
        (["--api_key=abc"], "TLS proxy checks it"),
        (["--api-k", "abc"], "TLS proxy checks it"),
        (["--trust-remote-code"], "runs Python code"),
        (["--allowed-local-media-path", "/"], "read files from the node"),
        (["--host", "0.0.0.0"], "127.0.0.1 only"),  # noqa: S104 - the value refused
        (["--port", "9000"], "[proxy] port"),
        (["--uds", "/run/vllm.sock"], "Unix socket"),
        (["--config", "/etc/vllm.yaml"], "past every check"),
        # A credential by name or by shape.
        (["--hf-token", "x"], "carries a credential"),
        (["--served-model-name", "hf_" + "Q" * 34], "<redacted: a Hugging Face token>"),
        (["--middleware", "ya29." + "a" * 30], "<redacted: a Google OAuth access token>"),
    ],
)
def test_extra_args_cannot_undo_a_guard(args: list[str], said: str) -> None:
    problem = _problem_for({"vllm": {"extra_args": args}}, "vllm.extra_args")
    assert said in problem
    assert "remove it from extra_args" in problem.partition(". Fix: ")[2]


def test_a_secret_in_extra_args_is_never_echoed() -> None:
    token = "hf_" + "Zq9" * 12
    with pytest.raises(ConfigError) as info:
        parse_config({"vllm": {"extra_args": ["--served-model-name", token]}})
    assert token not in str(info.value)


def test_unrelated_extra_args_pass() -> None:
    args = ["--served-model-name", "gemma", "--return-tokens-as-token-ids", "--max-num-seqs=256"]
    assert parse_config({"vllm": {"extra_args": args}}).vllm.extra_args == tuple(args)


@pytest.mark.parametrize(
    ("host", "said"),
    [
        ("169.254.169.254", "is an IP address"),
        ("8.8.8.8", "is an IP address"),  # public ones too: an address skips DNS entirely
        ("[::ffff:169.254.169.254]", "is an IP address"),
        ("2852039166", "numeric or shorthand"),  # 169.254.169.254 as one number
        ("0xa9fea9fe", "numeric or shorthand"),
        ("0251.0376.0251.0376", "numeric or shorthand"),
        ("127.1", "numeric or shorthand"),
        ("169.254.169.254.", "is an IP address"),
        ("metadata", "the metadata server"),
        ("metadata.google.internal", "the metadata server"),
        ("localhost", "the metadata server"),
        ("files.local", "the metadata server"),
        ("intranet", "not a fully qualified DNS name"),
        ("https://upload.wikimedia.org", "not a host name"),
    ],
)
def test_media_hosts_must_be_dns_names(host: str, said: str) -> None:
    problem = _problem_for(
        {"vllm": {"allowed_media_domains": [host]}}, "vllm.allowed_media_domains"
    )
    assert said in problem


def test_media_dns_names_pass() -> None:
    hosts = ["upload.wikimedia.org", "images.example.com.", "xn--bcher-kva.example"]
    assert parse_config({"vllm": {"allowed_media_domains": hosts}}).vllm.allowed_media_domains


@pytest.mark.parametrize(
    "cidrs",
    [
        ["0.0.0.0/0"],
        ["0.0.0.0/1", "128.0.0.0/1"],  # the whole IPv4 internet in two halves
        ["8.0.0.0/7"],
        ["203.0.0.0/16", "198.51.0.0/16"],  # two /16s: more than one /16 in all
        ["::/0"],
        ["2001:db8::/32"],
    ],
)
def test_the_public_check_counts_address_space(cidrs: list[str]) -> None:
    problem = _problem_for({"network": {"allowed_cidrs": cidrs}}, "network.allowed_cidrs")
    assert "public" in problem and "allow_public_endpoint = true" in problem
    # The explicit opt-in still opens it.
    opened = {"allowed_cidrs": cidrs, "allow_public_endpoint": True}
    assert parse_config({"network": opened}).network.allowed_cidrs == tuple(cidrs)


def test_private_ranges_and_a_slash_16_are_not_the_internet() -> None:
    cidrs = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "203.0.0.0/16"]
    assert parse_config({"network": {"allowed_cidrs": cidrs}}).network.allowed_cidrs


def test_the_proxy_port_cannot_be_vllms() -> None:
    problem = _problem_for({"proxy": {"port": 8000}}, "proxy.port")
    assert "[vllm] port" in problem


def test_the_proxy_image_is_pinned_and_validated() -> None:
    proxy = parse_config({}).proxy
    assert proxy.image.startswith("nginx:1.") and proxy.port == 8443
    digest = "nginx:1.30.5@sha256:" + "e" * 64
    assert parse_config({"proxy": {"image": digest}}).proxy.image == digest
    assert "not a container image" in _problem_for(
        {"proxy": {"image": "nginx latest"}}, "proxy.image"
    )


# --- problems in TOML words (issue 15, item 8) -------------------------------------------------


def _problems(toml: str, tmp_path: Path) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, toml))
    return info.value.problems


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        pytest.param(
            '[network]\nallowed_cidrs = "203.0.113.7/32"\n',
            "network.allowed_cidrs = '203.0.113.7/32': a string where a list belongs. Fix: "
            'write a list, like ["203.0.113.7/32"]',
            id="string-for-a-list",
        ),
        pytest.param(
            '[vllm]\nenable_prefix_caching = "yes"\n',
            "vllm.enable_prefix_caching = 'yes': a string where true or false belongs. Fix: "
            "write true or false, like true (no quotes)",
            id="string-for-a-bool",
        ),
        pytest.param(
            "[vllm]\nlimit_mm_per_prompt = 3\n",
            "vllm.limit_mm_per_prompt = 3: a whole number where a table belongs. Fix: write a "
            "table, like {image = 4, audio = 1}",
            id="number-for-a-table",
        ),
        pytest.param(
            '[vllm]\nport = "8000"\n',
            "vllm.port = '8000': a string where a whole number belongs. Fix: write a whole "
            "number, like 8000 (no quotes)",
            id="quoted-number",
        ),
        pytest.param(
            '[network]\nallowed_cidrs = ["203.0.113.7/32", 5]\n',
            "network.allowed_cidrs[1] = 5: a whole number where a string belongs. Fix: write a "
            'string, like "203.0.113.7/32"',
            id="item-of-a-list",
        ),
    ],
)
def test_a_value_of_the_wrong_kind_is_answered_in_toml_words(
    tmp_path: Path, toml: str, expected: str
) -> None:
    assert _problems(toml, tmp_path) == [expected]


def test_no_python_words_reach_a_config_problem(tmp_path: Path) -> None:
    toml = (
        "labels = []\nmax_run_duration = [1]\n[vllm]\nextra_args = 'x'\nblock_size = 'a'\n"
        "enable_auto_tool_choice = 1\n[network]\nallowed_cidrs = {a = 1}\n"
    )
    text = "\n".join(_problems(toml, tmp_path))
    for python in ("Input should", "tuple", "None", "True", "False", "()", "{'", "dictionary"):
        assert python not in text, (python, text)


def test_a_union_is_one_problem_not_one_per_member(tmp_path: Path) -> None:
    (problem,) = _problems("max_run_duration = [1]\n", tmp_path)
    # One problem for the str | int field, in the duration grammar's own words (it parses
    # "none" and durations before the type check), with the forms to write.
    assert problem.startswith("max_run_duration = [1]: [1] is not a duration. Fix: use e.g. '4h'")


def test_an_accelerator_with_no_known_flex_start_zone_names_the_accelerator(
    tmp_path: Path,
) -> None:
    (problem,) = _problems('accelerator_type = "v5litepod-4"\n', tmp_path)
    assert problem.startswith("accelerator_type = 'v5litepod-4': no zone is known to accept")
    assert 'use accelerator_type = "v5litepod-1"' in problem
    assert "none recorded" not in problem


def test_an_unsupported_chip_is_one_problem(tmp_path: Path) -> None:
    (problem,) = _problems('accelerator_type = "v6e-1"\n', tmp_path)
    assert "unknown TPU generation 'v6e'" in problem and "use 'v5litepod-1'" in problem


def test_a_flat_prices_table_is_refused_with_the_region_form(tmp_path: Path) -> None:
    (problem,) = _problems("[prices]\nspot = 0.5\n", tmp_path)
    assert problem.startswith("prices = {spot = 0.5}: spot = 0.5 is outside a region table")
    assert "[prices.us-central1] with spot = " in problem


def test_a_prices_table_for_a_region_is_read_with_its_date(tmp_path: Path) -> None:
    cfg = load_config(
        _write(
            tmp_path,
            "[prices.europe-west4]\nspot = 0.5\nFLEX_START = 0.55\nas_of = 2026-09-01\n",
        )
    )
    assert cfg.prices == {
        "europe-west4": {"spot": 0.5, "flex-start": 0.55, "as_of": datetime.date(2026, 9, 1)}
    }
    (problem,) = _problems('[prices.europe-west4]\nspot = 0.5\nas_of = "soon"\n', tmp_path)
    assert "as_of = 'soon' is not a date" in problem and "as_of = 2026-09-01" in problem
    (problem,) = _problems("[prices.europe-west4]\nspto = 0.5\n", tmp_path)
    assert "has an unknown key 'spto'. Fix: did you mean 'spot'?" in problem
