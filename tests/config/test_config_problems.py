"""Every refusal of a config as the user reads it: "key = value: reason. Fix: what to write"."""

from __future__ import annotations

import copy
import datetime
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tpudeploy import facts, platform
from tpudeploy.config import (
    PRICE_KEYS,
    ConfigError,
    DeployConfig,
    NetworkConfig,
    load_config,
    parse_config,
    require_project,
)
from tpudeploy.config.messages import toml_value
from tpudeploy.config.secretshape import redact
from tpudeploy.config.serveflags import DENIED_SERVE_FLAGS
from tpudeploy.durations import MAX_DURATION_SECONDS
from tpudeploy.errors import explain

REPO_ROOT = Path(__file__).resolve().parents[2]
DURATION_EXAMPLES = "use e.g. '4h', '90m', '2d', '45s', '1h30m' or plain seconds '14400'"
NO_END_FIX = 'or "none" (spot, on-demand) to bill until make destroy'
PRICE_EXAMPLE = "[prices.{region}] with spot = 0.5, flex-start = 0.55, as_of = 2026-09-01"


def problems(data: dict[str, Any]) -> list[str]:
    """What a command says of `data`: the config's problems and the guard rails' refusals of
    the rest of the file, in one round (tpudeploy.platform.parse_config)."""
    with pytest.raises(ConfigError) as info:
        platform.parse_config(data, source="deploy.toml")
    return info.value.problems


def said(key: str, value: object, reason: str, fix: str) -> str:
    """One problem line, in the shape every config problem takes (the value as TOML)."""
    return f"{key} = {toml_value(value)}: {reason}. Fix: {fix}"


# (the config, then the key, the value shown, the reason and the fix of its one problem)
REFUSALS = [
    # Cross-key rules (tpudeploy/config/loading.py, cross_check).
    pytest.param(
        {
            "network": {
                "network": "projects/host-proj-1/global/networks/vpc",
                "enable_external_ip": False,
            }
        },
        "network.nat",
        True,
        "a private node on a shared VPC gets its egress from the host project's Cloud NAT, which "
        "the node stack cannot declare (the router lives in the host project)",
        "set up Cloud NAT for the subnetwork in the host project, then set [network] nat = false; "
        "or set enable_external_ip = true",
        id="shared-vpc-nat",
    ),
    pytest.param(
        {"routing": {"gateway": True}},
        "routing.gateway",
        True,
        "the Gateway and endpoint picker route between GKE replicas: one TPU VM has nothing to "
        "route between",
        'set platform = "gke", or remove [routing] gateway',
        id="gateway-on-a-tpu-vm",
    ),
    pytest.param(
        {"vllm": {"shm_size": "10 gb"}},
        "vllm.shm_size",
        "10 gb",
        "not a docker size",
        "write e.g. 10gb (the build log's value) or 512m",
        id="shm-size",
    ),
    pytest.param(
        {"proxy": {"container_name": "front door"}},
        "proxy.container_name",
        "front door",
        "not a docker container name",
        "use letters, digits, '_', '.' and '-'",
        id="container-name",
    ),
    pytest.param(
        {"vllm": {"model": "google/gemma 4"}},
        "vllm.model",
        "google/gemma 4",
        "not a Hugging Face model id",
        "write e.g. google/gemma-4-E2B-it",
        id="model-id",
    ),
    pytest.param(
        {"vllm": {"tool_call_parser": "gemma-4"}},
        "vllm.tool_call_parser",
        "gemma-4",
        "not a vLLM choice name",
        "write one word of letters, digits and '_'",
        id="parser-name",
    ),
    pytest.param(
        {"vllm": {"limit_mm_per_prompt": {"text": 1}}},
        "vllm.limit_mm_per_prompt",
        {"text": 1},
        "unknown modality 'text'",
        "use image, audio or video",
        id="modality",
    ),
    pytest.param(
        {"vllm": {"limit_mm_per_prompt": {"image": -1}}},
        "vllm.limit_mm_per_prompt",
        {"image": -1},
        "image limit -1 is negative",
        "use 0 to disable",
        id="modality-negative",
    ),
    pytest.param(
        {"bench": {"contexts": [1024, 1024]}},
        "bench.contexts",
        [1024, 1024],
        "[1024, 1024] repeats a value",
        "list each once",
        id="bench-repeat",
    ),
    pytest.param(
        {"max_run_duration": "8d"},
        "max_run_duration",
        "8d",
        f"'8d' is 691200 s, over the 7-day maximum ({MAX_DURATION_SECONDS} s: flex-start accepts "
        "no longer run, and a deadline stays within a week)",
        f"use at most '7d'; {NO_END_FIX}",
        id="duration-over-7-days",
    ),
    pytest.param(
        {"max_run_duration": True},
        "max_run_duration",
        True,
        "true is not a duration",
        f"{DURATION_EXAMPLES}; {NO_END_FIX}",
        id="duration-boolean",
    ),
    pytest.param(
        {"flex_start_timeout": "4 hours"},
        "flex_start_timeout",
        "4 hours",
        "'4 hours' is not a duration (units d, h, m, s in that order, whole numbers only)",
        DURATION_EXAMPLES,
        id="duration-words",
    ),
    pytest.param(
        {"pipeline": True},
        "pipeline",
        True,
        "a pipeline deployment is applied by CI runners, whose disk is gone after each job: "
        "without remote state Terraform would forget what it created while it bills",
        'add state_bucket = "<the bucket gitops.toml names>", or remove pipeline = true for '
        "local use (your stacks then declare the node account, secrets and APIs)",
        id="pipeline-without-state",
    ),
    pytest.param(
        {"state_bucket": "gs://tf-state"},
        "state_bucket",
        "gs://tf-state",
        "not a Cloud Storage bucket name",
        "write the bare name, no gs://",
        id="bucket",
    ),
    pytest.param(
        {"project": "My Project"},
        "project",
        "My Project",
        "not a Google Cloud project id",
        "use the id (6-30 lowercase letters, digits, hyphens), not the display name or number",
        id="project-id",
    ),
    pytest.param(
        {"zone": "us-west4"},
        "zone",
        "us-west4",
        "not a zone name",
        "write e.g. us-west4-a (the build log's zone)",
        id="zone-name",
    ),
    pytest.param(
        {"labels": {"deployment": "x"}},
        "labels",
        {"deployment": "x"},
        "label key 'deployment' is set by tpudeploy itself",
        "rename it (reserved: deployment, provisioning, managed_by, component, tpudeploy-spec, "
        "tpudeploy-rung)",
        id="label-reserved",
    ),
    pytest.param(
        {"labels": {"team": "ML"}},
        "labels",
        {"team": "ML"},
        "label 'team' = 'ML' is not a valid Google Cloud label",
        "use lowercase letters, digits, '_' and '-', keys starting with a letter, at most 63 "
        "characters",
        id="label-value",
    ),
    pytest.param(
        {"network": {"allowed_cidrs": ["10.0.0.1/8"]}},
        "network.allowed_cidrs",
        ["10.0.0.1/8"],
        "'10.0.0.1/8' is not a valid CIDR range (10.0.0.1/8 has host bits set)",
        "write it like 203.0.113.0/24 with the host bits zero, or 203.0.113.7/32 for one address",
        id="cidr-host-bits",
    ),
    pytest.param(
        {"vllm": {"allowed_media_domains": []}},
        "vllm.allowed_media_domains",
        [],
        "an empty list lets vLLM fetch media from every host, including the metadata server",
        "list the hosts you trust, or keep ['media-urls-disabled.invalid'] to allow inline "
        "data: URLs only",
        id="media-empty",
    ),
    pytest.param(
        {"vllm": {"allowed_media_domains": ["https://upload.wikimedia.org"]}},
        "vllm.allowed_media_domains",
        ["https://upload.wikimedia.org"],
        "'https://upload.wikimedia.org' is not a host name (write the host only, e.g. "
        "upload.wikimedia.org, no scheme)",
        "remove it (inline data: URLs need no domain)",
        id="media-url",
    ),
    pytest.param(
        {"vllm": {"extra_args": ["--served-model-name", "gemma", "--api-key", "k"]}},
        "vllm.extra_args",
        ["--served-model-name", "gemma", "--api-key", "k"],
        f"item 2, '--api-key': --api-key is not allowed: {DENIED_SERVE_FLAGS['--api-key']}",
        "remove it from extra_args",
        id="extra-args-denied",
    ),
    pytest.param(
        {"vllm": {"extra_args": ["--gpu-mem=0.95"]}},
        "vllm.extra_args",
        ["--gpu-mem=0.95"],
        "item 0, '--gpu-mem=0.95': --gpu-memory-utilization is set from its own config key, "
        "vllm.gpu_memory_utilization, and a second one would override the validated value",
        "remove it from extra_args",
        id="extra-args-abbreviated",
    ),
    pytest.param(
        {"vllm": {"extra_args": ["--hf-token", "x"]}},
        "vllm.extra_args",
        ["--hf-token", "x"],
        "item 0, '--hf-token': --hf-token carries a credential, and extra_args land in instance "
        "metadata, Terraform state and the process list",
        "remove it from extra_args",
        id="extra-args-credential",
    ),
    # ---- [prices]: rates per region, with the day they were read
    pytest.param(
        {"prices": "x"},
        "prices",
        "x",
        "not a table",
        f"write {PRICE_EXAMPLE.format(region='REGION')}",
        id="prices-not-a-table",
    ),
    pytest.param(
        {"prices": {"spot": 0.5}},
        "prices",
        {"spot": 0.5},
        "spot = 0.5 is outside a region table: rates differ by region",
        "write them under the region they were read for, e.g. "
        + PRICE_EXAMPLE.format(region="us-central1"),
        id="prices-flat",
    ),
    pytest.param(
        {"prices": {"Mars": {"spot": 0.5}}},
        "prices",
        {"Mars": {"spot": 0.5}},
        "[prices.Mars] is not a region",
        "name a region, e.g. " + PRICE_EXAMPLE.format(region="europe-west4"),
        id="prices-region",
    ),
    pytest.param(
        {"prices": {"us-west4": {"spot": 0.0}}},
        "prices",
        {"us-west4": {"spot": 0.0}},
        "[prices.us-west4] spot = 0.0 is not a positive $/chip-hour",
        "write a number, e.g. 0.6 for $0.60 per chip-hour",
        id="prices-zero",
    ),
    pytest.param(
        {"prices": {"us-west4": {"spot": "0.6"}}},
        "prices",
        {"us-west4": {"spot": "0.6"}},
        "[prices.us-west4] spot = '0.6' is not a positive $/chip-hour",
        "write a number, e.g. 0.6 for $0.60 per chip-hour",
        id="prices-string",
    ),
    pytest.param(
        {"prices": {"us-west4": {"spot": True}}},
        "prices",
        {"us-west4": {"spot": True}},
        "[prices.us-west4] spot = True is not a positive $/chip-hour",
        "write a number, e.g. 0.6 for $0.60 per chip-hour",
        id="prices-boolean",
    ),
    pytest.param(
        {"prices": {"us-west4": {"as_of": "2026-09-01"}}},
        "prices",
        {"us-west4": {"as_of": "2026-09-01"}},
        "[prices.us-west4] sets no rate",
        "add at least the provisioning model you use, e.g. "
        + PRICE_EXAMPLE.format(region="us-west4"),
        id="prices-no-rate",
    ),
    pytest.param(
        {"prices": {"us-west4": {"spot": 0.5, "as_of": "yesterday"}}},
        "prices",
        {"us-west4": {"spot": 0.5, "as_of": "yesterday"}},
        "[prices.us-west4] as_of = 'yesterday' is not a date",
        "write the day you read the rates as a TOML date, e.g. as_of = 2026-09-01",
        id="prices-date",
    ),
    pytest.param(
        {"prices": {"us-west4": {"spot": 0.5, "source": 5}}},
        "prices",
        {"us-west4": {"spot": 0.5, "source": 5}},
        "[prices.us-west4] source = 5 is not text",
        'write where you read the rates as a string, e.g. source = "cloud.google.com/tpu/pricing"',
        id="prices-source",
    ),
    pytest.param(
        {"prices": {"us-west4": {"spott": 0.5}}},
        "prices",
        {"us-west4": {"spott": 0.5}},
        "[prices.us-west4] has an unknown key 'spott'",
        "did you mean 'spot'?",
        id="prices-unknown-close",
    ),
    pytest.param(
        {"prices": {"us-west4": {"zzz": 0.5}}},
        "prices",
        {"us-west4": {"zzz": 0.5}},
        "[prices.us-west4] has an unknown key 'zzz'",
        "known: " + ", ".join([*PRICE_KEYS, "as_of", "source"]),
        id="prices-unknown-far",
    ),
    # ---- rules across keys (loading.cross_check)
    pytest.param(
        {"max_run_duration": "none"},
        "max_run_duration",
        "none",
        "flex-start always ends: its queued resource takes a run duration of at most 7 days, "
        "and only spot and on-demand may run with no end",
        'write a duration such as "4h", or choose provisioning = "spot" or "on-demand"',
        id="flex-start-without-end",
    ),
    pytest.param(
        {"provisioning": "spot", "max_run_duration": "14m"},
        "max_run_duration",
        "14m",
        "a spot deadline under 15 minutes could pass before the deploy has created its job, "
        "which would then fire a year later",
        'use at least "15m"',
        id="deadline-too-soon",
    ),
    pytest.param(
        {"deadline": {"region": "us-central1"}},
        "deadline.region",
        "us-central1",
        "[deadline] places the Cloud Scheduler job that ends a spot or on-demand node (or a GKE "
        "cluster); a flex-start node has none: the TPU API ends it at max_run_duration",
        'remove [deadline] region, or choose provisioning = "spot" or "on-demand"',
        id="deadline-region-on-flex-start",
    ),
    pytest.param(
        {"auto_recover": True},
        "auto_recover",
        True,
        "flex-start is never preempted: its run ends (SUSPENDED) when max_run_duration is "
        "over, and that end is the billing stop, which only a deliberate make deploy starts "
        "again",
        'remove auto_recover, or use provisioning = "spot"',
        id="auto-recover-flex-start",
    ),
    pytest.param(
        {"region": "europe-west4"},
        "region",
        "europe-west4",
        "zone 'us-west4-a' is not in this region",
        "set region = 'us-west4' or leave it out",
        id="region",
    ),
    pytest.param(
        {"runtime_version": "v2-alpha-tpuv6e"},
        "runtime_version",
        "v2-alpha-tpuv6e",
        'does not run on accelerator_type "v5litepod-1"',
        'use runtime_version = "v2-alpha-tpuv5-lite"',
        id="runtime",
    ),
    pytest.param(
        {"zone": "europe-west4-b"},
        "zone",
        "europe-west4-b",
        "flex-start v5litepod-1 in this zone: " + facts.FLEX_START_REFUSED_ZONES["europe-west4-b"],
        "use one of the known-good zones: "
        + facts.flex_start_zones_text("v5litepod-1")
        + "; or set allow_untested_flex_zone = true to try anyway",
        id="flex-zone-refused",
    ),
    pytest.param(
        {"zone": "asia-east1-c"},
        "zone",
        "asia-east1-c",
        "flex-start v5litepod-1 in this zone: not known to accept it",
        "use one of the known-good zones: "
        + facts.flex_start_zones_text("v5litepod-1")
        + "; or set allow_untested_flex_zone = true to try anyway",
        id="flex-zone-unknown",
    ),
    pytest.param(
        {"accelerator_type": "v5litepod-4"},
        "accelerator_type",
        "v5litepod-4",
        "no zone is known to accept flex-start v5litepod-4 (flex-start was seen to work for "
        "v5litepod-1 only)",
        'use accelerator_type = "v5litepod-1", provisioning = "spot" or "on-demand", or set '
        "allow_untested_flex_zone = true to try anyway",
        id="flex-other-slice",
    ),
    pytest.param(
        {"network": {"allowed_cidrs": ["8.0.0.0/7"]}},
        "network.allowed_cidrs",
        ["8.0.0.0/7"],
        "together they open the API port to a /7's worth of public IPv4 addresses, more than "
        "a /16: that is the internet, not your network",
        "list your own ranges, or set [network] allow_public_endpoint = true if you really mean it",
        id="public-ipv4",
    ),
    pytest.param(
        {"network": {"allowed_cidrs": ["10.0.0.0/8", "2001:db8::/32"]}},
        "network.allowed_cidrs",
        ["10.0.0.0/8", "2001:db8::/32"],
        "together they open the API port to a /32's worth of public IPv6 addresses, more than "
        "a /48: that is the internet, not your network",
        "list your own ranges, or set [network] allow_public_endpoint = true if you really mean it",
        id="public-ipv6",
    ),
    pytest.param(
        {"proxy": {"port": 8000}},
        "proxy.port",
        8000,
        "is also [vllm] port: vLLM listens on it on loopback, the proxy on every address",
        "use another port, e.g. 8443",
        id="proxy-port",
    ),
    pytest.param(
        {"vllm": {"port": 8443}},
        "proxy.port",
        8443,
        "is also [vllm] port: vLLM listens on it on loopback, the proxy on every address",
        "use another port, e.g. 9443",
        id="proxy-port-at-8443",
    ),
    # ---- unknown keys
    pytest.param(
        {"zonee": "us-west4-a"},
        "zonee",
        "us-west4-a",
        "unknown key",
        "remove it or fix the spelling; did you mean 'zone'?",
        id="unknown-close",
    ),
    pytest.param(
        {"colour": "blue"},
        "colour",
        "blue",
        "unknown key",
        "remove it or fix the spelling; known keys: " + ", ".join(DeployConfig.model_fields),
        id="unknown-far",
    ),
    pytest.param(
        {"network": {"colour": "blue"}},
        "network.colour",
        "blue",
        "unknown key",
        "remove it or fix the spelling; known keys: " + ", ".join(NetworkConfig.model_fields),
        id="unknown-nested",
    ),
    pytest.param(
        {"bench": {"quick": {"profile": "full"}}},
        "bench.quick.profile",
        "full",
        "unknown key",
        "remove it or fix the spelling; known keys: contexts, clients, repetitions, "
        "output_len, prompts_per_client, min_prompts, port, model, container, host, "
        "save_detailed",
        id="unknown-deep",
    ),
]


@pytest.mark.parametrize(("data", "key", "value", "reason", "fix"), REFUSALS)
def test_each_refusal_names_key_value_reason_and_fix(
    data: dict[str, Any], key: str, value: object, reason: str, fix: str
) -> None:
    assert problems(data) == [said(key, value, reason, fix)]


# Values on the edge of a rule, accepted.
ACCEPTED = [
    pytest.param({"vllm": {"limit_mm_per_prompt": {"video": 0}}}, id="modality-off"),
    pytest.param({"bench": {"contexts": [1024, 2048], "clients": [1]}}, id="bench-distinct"),
    pytest.param({"state_bucket": "tf-state-bucket"}, id="bucket"),
    pytest.param({"state_bucket": "tf-state-bucket", "pipeline": True}, id="pipeline"),
    pytest.param(
        {"prices": {"us-west4": {"spot": 0.5, "FLEX_START": 0.61, "as_of": "2026-09-01"}}},
        id="prices",
    ),
    pytest.param({"labels": {"team": "ml"}}, id="label"),
    pytest.param({"vllm": {"allowed_media_domains": ["media.cdn-2.org"]}}, id="media-host"),
    pytest.param({"vllm": {"extra_args": ["--served-model-name", "token"]}}, id="word-token"),
    pytest.param({"accelerator_type": "v5litepod-4", "provisioning": "spot"}, id="vm-slice"),
    pytest.param({"provisioning": "spot", "max_run_duration": "15m"}, id="shortest-deadline"),
    pytest.param(
        {"provisioning": "spot", "deadline": {"region": "us-central1"}}, id="deadline-region-spot"
    ),
    pytest.param({"provisioning": "on-demand", "max_run_duration": "none"}, id="no-end-vm"),
    pytest.param({"provisioning": "spot", "auto_recover": True}, id="auto-recover-spot"),
    pytest.param({"network": {"allowed_cidrs": ["203.0.0.0/16", "10.0.0.0/8"]}}, id="a-slash-16"),
    pytest.param({"network": {"allowed_cidrs": ["2001:db8::/48"]}}, id="a-slash-48"),
]


@pytest.mark.parametrize("data", ACCEPTED)
def test_values_on_the_edge_of_a_rule_pass(data: dict[str, Any]) -> None:
    parse_config(data)


@pytest.mark.parametrize(
    ("arg", "flag"),
    [
        ("--h", "--host"),  # any prefix past "--" counts (argparse's allow_abbrev)
        ("--ap", "--api-key"),
        ("--api_key=abc=def", "--api-key"),
        ("--config.x.y=1", "--config"),
    ],
)
def test_extra_args_spellings_of_a_denied_flag(arg: str, flag: str) -> None:
    (problem,) = problems({"vllm": {"extra_args": [arg]}})
    assert problem.startswith(f"vllm.extra_args = [{arg!r}]: item 0, {arg!r}: {flag} is not ")


def test_media_host_names_up_to_253_characters() -> None:
    label = "a" * 63
    longest = ".".join([label, label, label, "a" * 57, "org"])  # 253 characters
    assert len(longest) == 253
    parse_config({"vllm": {"allowed_media_domains": [longest]}})
    # 254 characters, every label a valid one: too long for DNS all the same.
    longer = ".".join([label, label, label, "a" * 58, "org"])
    (problem,) = problems({"vllm": {"allowed_media_domains": [longer]}})
    assert "is not a host name" in problem


def test_a_price_table_keeps_its_rates_date_and_source() -> None:
    table = {"spot": 0.5, "FLEX_START": 0.61, "as_of": "2026-09-01", "source": "console"}
    assert parse_config({"prices": {"us-west4": table}}).prices == {
        "us-west4": {
            "spot": 0.5,
            "flex-start": 0.61,
            "as_of": datetime.date(2026, 9, 1),
            "source": "console",
        }
    }


def test_every_unknown_key_is_reported() -> None:
    found = problems({"zonee": "x", "colour": "blue"})
    assert [p.split(" = ", 1)[0] for p in found] == ["zonee", "colour"]


def test_a_config_error_lists_every_problem_under_its_source() -> None:
    error = ConfigError("deploy.toml", ["a = 1: first. Fix: one", "b = 2: second. Fix: two"])
    assert str(error) == (
        "deploy.toml: 2 problem(s) in the deployment config:\n"
        "  - a = 1: first. Fix: one\n"
        "  - b = 2: second. Fix: two"
    )


def test_deploying_without_a_project_names_the_file() -> None:
    with pytest.raises(ConfigError) as info:
        require_project(parse_config({}), source="deployments/staging.toml")
    assert info.value.source == "deployments/staging.toml"
    assert info.value.problems == [
        said(
            "project",
            "",
            "no Google Cloud project to deploy into",
            'set project = "my-project" in the config or export GOOGLE_CLOUD_PROJECT',
        )
    ]


def test_the_config_file_is_read_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """TOML is UTF-8; a C locale without UTF-8 mode must not change what a file says."""
    path = tmp_path / "deploy.toml"
    path.write_text('[vllm]\nextra_args = ["--served-model-name", "gemma-ü"]\n', encoding="utf-8")
    assert load_config(path).vllm.extra_args == ("--served-model-name", "gemma-ü")
    code = "import sys; from tpudeploy.config import load_config; load_config(sys.argv[1])"
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    run = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr


def test_the_container_environment_writes_each_variable_as_the_engine_reads_it() -> None:
    v = parse_config(
        {
            "vllm": {
                "attn_bucketized_num_reqs": True,
                "slice_rope_cache": True,
                "num_precompile_workers": 4,
                "vllm_tpu_bucket_padding_gap": 128,
                "vllm_xla_check_recompilation": True,
            }
        }
    ).vllm
    assert v.container_env() == {
        "ATTN_BUCKETIZED_NUM_REQS": "1",
        "SLICE_ROPE_CACHE": "1",
        "NUM_PRECOMPILE_WORKERS": "4",
        "VLLM_TPU_BUCKET_PADDING_GAP": "128",
        "VLLM_XLA_CHECK_RECOMPILATION": "1",
        # Redirects off: an allowed media host cannot bounce a fetch to the metadata server.
        "VLLM_MEDIA_URL_ALLOW_REDIRECTS": "0",
    }


def test_the_bench_reads_only_the_keys_the_user_set() -> None:
    bench = parse_config(
        {"bench": {"contexts": [1024], "profile": "quick", "quick": {"clients": [1, 2]}}}
    ).bench
    assert bench.table() == {"contexts": [1024], "profile": "quick", "quick": {"clients": [1, 2]}}
    # Unset keys and an empty [bench.quick] say nothing: the sweep keeps its own defaults.
    assert parse_config({"bench": {"repetitions": 1}}).bench.table() == {"repetitions": 1}
    assert parse_config({}).bench.table() == {}


def test_secrets_are_redacted_wherever_they_sit_in_a_value() -> None:
    token = "hf_" + "Q" * 34
    shown = "<redacted: a Hugging Face token>"
    assert redact(["--x", token]) == ["--x", shown]
    assert redact(("--x", token)) == ("--x", shown)
    assert redact({"token": token, "n": 1}) == {"token": shown, "n": 1}


def test_the_cli_prints_a_config_error_with_each_problem_on_its_own_line() -> None:
    """Every command's error path (tpudeploy.errors.explain) flattens a message to one line; a
    config error keeps its list, each problem with its fix, and exits 2 (nothing attempted)."""
    error = ConfigError("deploy.toml", ["a = 1: first. Fix: one", "b = 2: second. Fix: two"])
    line, code = explain(error)
    assert line.splitlines() == [
        "deploy.toml: 2 problem(s) in the deployment config:",
        "  - a = 1: first. Fix: one",
        "  - b = 2: second. Fix: two",
    ]
    assert code == 2


# Issue 23 item 6: one round. A refused key is judged at its default so the rest of the file
# (cross-key checks, guard rails) is still judged, wherever the refused key sits.
ONE_ROUND = [
    pytest.param(
        {"vllm": {"max_model_len": "x", "gpu_memory_utilization": 0.95}, "zone": "europe-west4-a"},
        ["vllm.max_model_len", "zone", "error: vllm.gpu_memory_utilization"],
        id="in-a-table",
    ),
    pytest.param(
        {"vllm": {"limit_mm_per_prompt": {"image": "x"}, "gpu_memory_utilization": 0.95}},
        ["vllm.limit_mm_per_prompt.image", "error: vllm.gpu_memory_utilization"],
        id="in-a-table-of-a-table",
    ),
    pytest.param(
        {"network": {"allowed_cidrs": ["nope"]}, "vllm": {"gpu_memory_utilization": 0.95}},
        ["network.allowed_cidrs", "error: vllm.gpu_memory_utilization"],
        id="in-a-list",
    ),
    pytest.param(
        {"max_run_duration": 1.5, "vllm": {"gpu_memory_utilization": 0.95}},
        ["max_run_duration", "error: vllm.gpu_memory_utilization"],
        id="a-union-at-the-top",
    ),
    pytest.param(
        # An item of a list: the table holding the list stands at its defaults.
        {"vllm": {"extra_args": [1]}, "zone": "europe-west4-a"},
        ["vllm.extra_args[0]", "zone"],
        id="an-item-of-a-list",
    ),
    pytest.param(
        {"vllm": "x", "zone": "europe-west4-a"},
        ["vllm", "zone"],
        id="a-table-written-as-a-value",
    ),
]


@pytest.mark.parametrize(("data", "keys"), ONE_ROUND)
def test_a_refused_key_does_not_hide_the_rest_of_the_file(
    data: dict[str, Any], keys: list[str]
) -> None:
    written = copy.deepcopy(data)
    assert [p.split(" = ", 1)[0] for p in problems(data)] == keys
    assert data == written, "judging the rest must not change the caller's tables"


SPECULATIVE_REFUSALS = [
    pytest.param(
        {"method": "eagle", "num_speculative_tokens": 3},
        'method \'eagle\' is not offered. Fix: use method = "ngram", "mtp" (each is vLLM\'s '
        "SpeculativeConfig method with a source in tpudeploy/config/speculative.py)",
        id="a-method-with-a-draft-model",
    ),
    pytest.param({"num_speculative_tokens": 3}, "method None is not offered", id="no-method"),
    pytest.param(
        {"method": "ngram", "num_speculative_tokens": 2, "model": "x/y"},
        "unknown key 'model'. Fix: the ngram method takes num_speculative_tokens, "
        "prompt_lookup_max, prompt_lookup_min",
        id="a-draft-model",
    ),
    pytest.param(
        {"method": "ngram"},
        "num_speculative_tokens is required. Fix: e.g. 5 (vLLM's n-gram example)",
        id="no-token-count",
    ),
    pytest.param(
        {"method": "ngram", "num_speculative_tokens": 0},
        "num_speculative_tokens = 0 must be a whole number of at least 1",
        id="zero-tokens",
    ),
    pytest.param(
        {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": "2"},
        "prompt_lookup_min = '2' must be a whole number of at least 1",
        id="a-quoted-number",
    ),
    pytest.param(
        {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 0},
        "prompt_lookup_max = 0 must be a whole number of at least 1",
        id="zero-lookup",
    ),
    pytest.param(
        {
            "method": "ngram",
            "num_speculative_tokens": 2,
            "prompt_lookup_min": 5,
            "prompt_lookup_max": 2,
        },
        "prompt_lookup_min 5 is above prompt_lookup_max 2. Fix: swap them",
        id="min-above-max",
    ),
    pytest.param(
        {"method": "mtp", "num_speculative_tokens": 4},
        "the mtp method needs model = a draft checkpoint sized here, not None. Fix: use one of: "
        "google/gemma-4-E2B-it-assistant",
        id="mtp-without-its-draft",
    ),
    pytest.param(
        {"method": "mtp", "num_speculative_tokens": 4, "model": "x/unsized-draft"},
        "the mtp method needs model = a draft checkpoint sized here, not 'x/unsized-draft'",
        id="mtp-with-an-unsized-draft",
    ),
    pytest.param(
        {
            "method": "mtp",
            "model": "google/gemma-4-E2B-it-assistant",
            "prompt_lookup_max": 4,
            "num_speculative_tokens": 4,
        },
        "unknown key 'prompt_lookup_max'. Fix: the mtp method takes model, num_speculative_tokens",
        id="mtp-with-ngram-keys",
    ),
]


@pytest.mark.parametrize(("spec", "reason"), SPECULATIVE_REFUSALS)
def test_speculative_decoding_methods_keys_and_drafts(spec: dict[str, Any], reason: str) -> None:
    (found,) = problems({"vllm": {"speculative_config": spec}})
    assert found.startswith(f"vllm.speculative_config = {toml_value(spec)}: {reason}"), found


def test_a_speculative_flag_written_true_is_refused_by_its_kind() -> None:
    (found,) = problems(
        {"vllm": {"speculative_config": {"method": "ngram", "num_speculative_tokens": True}}}
    )
    assert found.startswith("vllm.speculative_config.num_speculative_tokens = true: true/false ")


@pytest.mark.parametrize(
    "spec",
    [
        {"method": "ngram", "num_speculative_tokens": 1},
        {
            "method": "ngram",
            "num_speculative_tokens": 5,
            "prompt_lookup_min": 4,
            "prompt_lookup_max": 4,
        },
        {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 1},
        {"method": "mtp", "model": "google/gemma-4-E2B-it-assistant", "num_speculative_tokens": 4},
    ],
)
def test_a_speculative_spec_vllm_takes_is_kept_as_written(spec: dict[str, Any]) -> None:
    assert parse_config({"vllm": {"speculative_config": spec}}).vllm.speculative_config == spec
    assert parse_config({}).vllm.speculative_config is None


@pytest.mark.parametrize(
    ("region", "kept"), [("", ""), ("us-central1", "us-central1"), ("europe-west4", "europe-west4")]
)
def test_the_deadline_region_is_a_region_or_the_nodes_own(region: str, kept: str) -> None:
    # spot: a flex-start node has no deadline job, and a region set for it is refused
    cfg = parse_config({"provisioning": "spot", "deadline": {"region": region}})
    assert cfg.deadline.region == kept


@pytest.mark.parametrize("region", ["us central1", "US-CENTRAL1", "us-central1-a", "-"])
def test_a_deadline_region_that_is_not_a_region_is_refused(region: str) -> None:
    assert problems({"deadline": {"region": region}}) == [
        said(
            "deadline.region",
            region,
            "not a region name",
            "write a Cloud Scheduler location such as us-central1 (`gcloud scheduler locations "
            "list` shows your project's), or leave it out for the node's region",
        )
    ]


def test_a_table_where_a_union_value_belongs_is_one_problem_and_the_rest_still_judged() -> None:
    """pydantic reports such a value once per type it tried (..., 'method', 'str') and (...,
    'int'): locations below the value, which is itself a table here. Judging the rest of the
    file without it must not trip over that (a KeyError is a traceback), and still reports the
    file's other mistake in the same round (issue 23, item 6)."""
    found = problems({"vllm": {"speculative_config": {"method": {"a": 1}}, "max_model_len": 0}})
    method = [p for p in found if p.startswith("vllm.speculative_config.method = {a = 1}")]
    assert len(method) == 1 and "Fix: write a string or a whole number" in method[0]
    assert any(p.startswith("vllm.max_model_len = 0") for p in found), found


def test_a_gke_deployment_may_route_through_a_gateway() -> None:
    """[routing] gateway is refused on one TPU VM only (the case above)."""
    raw = tomllib.loads((REPO_ROOT / "deployments" / "gke.toml").read_text(encoding="utf-8"))
    routed = {**raw, "routing": {"gateway": True, "certificate": "c", "proxy_subnet_exists": True}}
    # On a cluster new enough to have the InferencePool kind (facts.GKE_INFERENCE_CRDS_*).
    routed["gke"] = {**raw["gke"], "min_version": facts.GKE_INFERENCE_CRDS_MIN_VERSION}
    assert parse_config(routed).routing.gateway is True


def test_a_file_whose_rest_cannot_be_judged_still_names_its_source() -> None:
    """When even the rest of the file fails (the refused value could not be taken out), the
    error still says which file: the user may have several (deployments/*.toml)."""
    with pytest.raises(ConfigError) as info:
        parse_config({"vllm": {"speculative_config": {"method": {"a": 1}}}}, source="staging.toml")
    assert info.value.source == "staging.toml"
    assert str(info.value).startswith("staging.toml: 1 problem(s) in the deployment config:")


def test_a_later_problem_about_a_refused_nested_keys_stand_in_is_not_said() -> None:
    """vllm.max_model_len is refused; the rest is judged with its default standing in, and the
    load check's "longer than vllm.max_model_len (32768)" would be about a value the user never
    wrote: it is left out, the key matched by its dotted name."""
    found = problems(
        {
            "vllm": {"max_model_len": "big"},
            "load": {"expected_clients": 1, "expected_context": 40000},
        }
    )
    assert len(found) == 1 and found[0].startswith("vllm.max_model_len = 'big': a string"), found


def test_a_file_that_fails_a_cross_key_rule_also_hears_the_guard_rails() -> None:
    """One round for a file whose shape is valid but whose keys disagree: the config says the
    region does not hold the zone, and the guard rails (applied above config, by the seam's
    load) add what they would refuse of the same file, instead of a second round for it."""
    keys = [
        p.removeprefix("error: ").split(" = ", 1)[0]
        for p in problems({"region": "europe-west4", "vllm": {"gpu_memory_utilization": 0.95}})
    ]
    assert keys == ["region", "vllm.gpu_memory_utilization"]
