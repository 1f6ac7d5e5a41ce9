"""The synthesized Terraform JSON of both stacks: the properties that matter, per configuration."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stacks import EAGER_PROVIDERS_ENV
from tests.conftest import Synthesizer, resources, run_main
from tpudeploy.config import IAP_SSH_RANGE, parse_config
from tpudeploy.render import node_metadata

# Four configurations, each synthesized once per session (see conftest). The default is
# flex-start (a queued resource, tested with the flex-start client); spot and on-demand declare a
# google_tpu_v2_vm.
DEFAULT: dict[str, Any] = {}
SPOT: dict[str, Any] = {"provisioning": "spot"}
# On-demand, also without an external IP (the private variant rides along to save a synth).
ON_DEMAND: dict[str, Any] = {"provisioning": "on-demand", "network": {"enable_external_ip": False}}
OPEN_TO: dict[str, Any] = {
    "provisioning": "spot",
    "project": "my-proj-123",
    "network": {"allowed_cidrs": ["203.0.113.0/24", "2001:db8:1::/48", "198.51.100.7/32"]},
}
ALL = (DEFAULT, SPOT, ON_DEMAND, OPEN_TO)

NAME = "gemma4-v5e"
SECRETS = f"{NAME}-secrets"
NODE = f"{NAME}-node"
VLLM_TAG = f"{NAME}-vllm"


def only(stack: dict[str, Any], rtype: str) -> dict[str, Any]:
    found = resources(stack, rtype)
    assert len(found) == 1, f"expected exactly one {rtype}, found {sorted(found)}"
    return next(iter(found.values()))


def unescape_terraform(text: str) -> str:
    """What Terraform makes of a literal string: `$${` and `%%{` are escapes for `${` and `%{`."""
    return text.replace("$${", "${").replace("%%{", "%{")


def startup_script(stack: dict[str, Any]) -> str:
    """The node's startup script as the VM receives it (after Terraform's unescaping)."""
    return unescape_terraform(only(stack, "google_tpu_v2_vm")["metadata"]["startup-script"])


def strings(value: Any) -> Iterator[str]:
    """Every string in a synthesized document, descending into strings that hold JSON (the
    flex-start queued resource carries its node spec, startup script included, as JSON)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)
    elif isinstance(value, str):
        yield value
        if value[:1] in "{[":
            try:
                inner = json.loads(value)
            except ValueError:
                return
            yield from strings(inner)


@pytest.fixture
def spot_node(synth: Synthesizer) -> dict[str, Any]:
    return synth(SPOT)[NODE]


# --- the TPU node ------------------------------------------------------------------------------


@pytest.mark.parametrize(("overrides", "spot"), [(SPOT, True), (ON_DEMAND, False)])
def test_one_tpu_vm_as_the_seed_creates_it(
    synth: Synthesizer, overrides: dict[str, Any], spot: bool
) -> None:
    stacks = synth(overrides)
    assert set(stacks) == {SECRETS, NODE}
    vm = only(stacks[NODE], "google_tpu_v2_vm")
    assert vm["name"] == NAME
    assert vm["accelerator_type"] == "v5litepod-1"
    assert vm["runtime_version"] == "v2-alpha-tpuv5-lite"
    assert vm["zone"] == "us-west4-a"
    if spot:
        assert vm["scheduling_config"]["spot"] is True
    else:
        assert not vm.get("scheduling_config", {}).get("spot", False)
        assert not vm.get("scheduling_config", {}).get("preemptible", False)
    assert vm["labels"]["provisioning"] == ("spot" if spot else "on-demand")
    # Only the secrets stack's resources: the TPU VM lives in the billing stack alone.
    assert not resources(stacks[SECRETS], "google_tpu_v2_vm")


def test_node_runs_as_the_dedicated_service_account(synth: Synthesizer) -> None:
    stacks = synth(SPOT)
    vm = only(stacks[NODE], "google_tpu_v2_vm")
    # Spot also gets the deadline job's account (tests/stacks/test_deadline_synth.py).
    accounts = resources(stacks[SECRETS], "google_service_account").values()
    (sa,) = [a for a in accounts if a["account_id"] == f"{NAME}-node"]
    email = vm["service_account"]["email"]
    assert email == f"{sa['account_id']}@${{var.project}}.iam.gserviceaccount.com"
    assert vm["service_account"]["scope"] == ["https://www.googleapis.com/auth/cloud-platform"]
    # With a project set, the email still derives from the same account id.
    # The email is built from the project variable, whose default is then the config's project.
    vm = only(synth(OPEN_TO)[NODE], "google_tpu_v2_vm")
    assert vm["service_account"]["email"] == email


def test_node_metadata_os_login_and_startup_script(spot_node: dict[str, Any]) -> None:
    metadata = only(spot_node, "google_tpu_v2_vm")["metadata"]
    assert metadata["enable-oslogin"] == "TRUE"
    assert metadata["block-project-ssh-keys"] == "TRUE"
    assert metadata["startup-script"].startswith("#!/usr/bin/env bash\n")
    assert "ssh-keys" not in metadata


def test_scripts_reach_the_vm_unchanged_through_terraform(spot_node: dict[str, Any]) -> None:
    # Bash's ${VAR:-default} would be a Terraform interpolation: every one must be escaped, so
    # that Terraform hands the VM exactly the script that tpudeploy.render produced.
    metadata = only(spot_node, "google_tpu_v2_vm")["metadata"]
    rendered = node_metadata(parse_config(SPOT))
    assert set(metadata) == set(rendered)
    for key, value in metadata.items():
        assert not re.search(r"(?<![$%])[$%]\{", value), key
        assert unescape_terraform(value) == rendered[key], key


@pytest.mark.parametrize(
    "fragment",
    [
        "--dtype bfloat16",
        "--kv-cache-dtype auto",
        "--max-model-len 32768",
        "--max-num-batched-tokens 4096",
        "--tensor-parallel-size 1",
        "--gpu-memory-utilization 0.92",
        "--enable-prefix-caching",
        "--disable-chunked-mm-input",
        """--limit-mm-per-prompt '{"image":4,"audio":1}'""",
        "--enable-auto-tool-choice",
        "--tool-call-parser gemma4",
        "--reasoning-parser gemma4",
        "vllm serve google/gemma-4-E2B-it",
        "vllm/vllm-tpu:nightly",
        "--shm-size 10gb",
        # The seed's RAM-backed HF_HOME, on a root-only tmpfs of the node's own (issue 22).
        '-v "$HF_DIR:$HF_HOME_IN_CONTAINER"',
        '-e "HF_HOME=$HF_HOME_IN_CONTAINER"',
        ":/root/.cache/vllm",  # the compile cache volume: the seed's most valuable line
        "--net=host",
        "--privileged",
        f"{NAME}-hf-token",  # the secret's id; its value is fetched at boot
    ],
)
def test_startup_script_carries_the_seeds_flags(spot_node: dict[str, Any], fragment: str) -> None:
    assert fragment in startup_script(spot_node)


def test_startup_script_mounts_the_compile_cache(spot_node: dict[str, Any]) -> None:
    # -v <host dir>:/root/.cache/vllm, the host dir under ~/.cache/vllm as in the seed.
    script = startup_script(spot_node)
    assert re.search(r'-v "?\$CACHE_DIR:/root/\.cache/vllm"?', script) or re.search(
        r"-v \S*\.cache/vllm:/root/\.cache/vllm", script
    )
    assert "/.cache/vllm" in script.split(":/root/.cache/vllm")[0]


def test_private_node_has_no_external_ip(synth: Synthesizer) -> None:
    node = synth(ON_DEMAND)[NODE]
    vm = only(node, "google_tpu_v2_vm")
    assert vm["network_config"]["enable_external_ips"] is False
    assert "access_config" not in node["output"]["ip"]["value"]
    assert "network_endpoints[0].ip_address" in node["output"]["ip"]["value"]
    # The seed reaches its node on the external IP.
    spot_vm = only(synth(SPOT)[NODE], "google_tpu_v2_vm")
    assert spot_vm["network_config"]["enable_external_ips"] is True


# --- firewall ----------------------------------------------------------------------------------


def _firewall_for_port(stack: dict[str, Any], port: str) -> list[dict[str, Any]]:
    return [
        rule
        for rule in resources(stack, "google_compute_firewall").values()
        if any(port in allow.get("ports", []) for allow in rule["allow"])
    ]


def _by_name(stack: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in resources(stack, "google_compute_firewall").values()}


@pytest.mark.parametrize("overrides", ALL, ids=["flex", "spot", "od", "open"])
def test_deny_all_sits_under_the_allows_and_over_the_default_network(
    synth: Synthesizer, overrides: dict[str, Any]
) -> None:
    """Issue 13, defect 6: the stack only added allows, so the default network's
    default-allow-ssh (0.0.0.0/0) and default-allow-internal (priority 65534) still applied."""
    rules = _by_name(synth(overrides)[NODE])
    denies = [rules[f"{NAME}-deny-all"], rules[f"{NAME}-deny-all-v6"]]
    assert [d["source_ranges"] for d in denies] == [["0.0.0.0/0"], ["::/0"]]
    for deny in denies:
        assert deny["direction"] == "INGRESS"
        assert deny["deny"] == [{"protocol": "all"}] and "allow" not in deny
        assert deny["target_tags"] == [VLLM_TAG]
        assert deny["priority"] < 65534  # stronger than every rule of the default network
    allows = [r for r in rules.values() if "allow" in r]
    assert allows
    for allow in allows:
        assert allow["priority"] < denies[0]["priority"], allow["name"]
        assert allow["target_tags"] == [VLLM_TAG] and "source_tags" not in allow
        assert allow["source_ranges"], allow["name"]  # empty would mean 0.0.0.0/0


@pytest.mark.parametrize("overrides", [DEFAULT, SPOT, ON_DEMAND], ids=["flex", "spot", "od"])
def test_no_api_rule_without_allowed_cidrs(synth: Synthesizer, overrides: dict[str, Any]) -> None:
    # A GCE rule with empty source ranges and no source tags means 0.0.0.0/0: there must be no
    # rule at all, not an empty one. The default deployment opens nothing but IAP SSH.
    allows = [r for r in _by_name(synth(overrides)[NODE]).values() if "allow" in r]
    (ssh,) = allows
    assert ssh["direction"] == "INGRESS"
    assert ssh["source_ranges"] == [IAP_SSH_RANGE] == ["35.235.240.0/20"]
    assert ssh["allow"] == [{"protocol": "tcp", "ports": ["22"]}]


def test_api_port_open_only_to_allowed_cidrs(synth: Synthesizer) -> None:
    node = synth(OPEN_TO)[NODE]
    vm = only(node, "google_tpu_v2_vm")
    rules = _by_name(node)
    v4, v6 = rules[f"{NAME}-allow-api"], rules[f"{NAME}-allow-api-v6"]
    # The proxy's TLS port, never vLLM's (which listens on loopback only); one rule per IP
    # version because a VPC firewall rule cannot mix them.
    for rule in (v4, v6):
        assert rule["allow"] == [{"protocol": "tcp", "ports": ["8443"]}]
        assert rule["network"] == vm["network_config"]["network"]
    assert v4["source_ranges"] == ["203.0.113.0/24", "198.51.100.7/32"]
    assert v6["source_ranges"] == ["2001:db8:1::/48"]
    assert VLLM_TAG in vm["tags"]
    assert not [r for r in rules.values() if "8000" in json.dumps(r.get("allow", []))]
    # SSH stays IAP-only when the API port is opened.
    assert rules[f"{NAME}-allow-iap-ssh"]["source_ranges"] == [IAP_SSH_RANGE]
    assert len(rules) == 5


# --- the secrets stack -------------------------------------------------------------------------


def test_the_token_secret_and_never_its_value(synth: Synthesizer) -> None:
    for overrides in ALL:
        stacks = synth(overrides)
        secrets = resources(stacks[SECRETS], "google_secret_manager_secret")
        hf = [s for s in secrets.values() if s["secret_id"] == f"{NAME}-hf-token"]
        assert len(hf) == 1, sorted(secrets)
        assert "replication" in hf[0]
        # Values go in with `make secret`, never through Terraform: no version resource anywhere.
        for name, stack in stacks.items():
            assert not resources(stack, "google_secret_manager_secret_version"), name
            assert "google_secret_manager_secret_version" not in json.dumps(stack), name
            if name == NODE:
                assert not resources(stack, "google_secret_manager_secret"), name


def test_secret_level_iam_for_the_node_account_only(secrets_stack: dict[str, Any]) -> None:
    members = resources(secrets_stack, "google_secret_manager_secret_iam_member")
    secrets = resources(secrets_stack, "google_secret_manager_secret")
    (sa_id,) = resources(secrets_stack, "google_service_account")
    granted = set()
    for iam in members.values():
        assert iam["role"] == "roles/secretmanager.secretAccessor"
        assert iam["member"] == f"serviceAccount:${{google_service_account.{sa_id}.email}}"
        m = re.fullmatch(r"\$\{google_secret_manager_secret\.(.+)\.secret_id\}", iam["secret_id"])
        assert m and m[1] in secrets, iam["secret_id"]
        granted.add(secrets[m[1]]["secret_id"])
    assert f"{NAME}-hf-token" in granted
    # No wider grant: no bindings/policies that could replace other members, no project IAM
    # but the Ops Agent's two writers (test_the_node_account_writes_logs_and_metrics_...).
    for rtype in secrets_stack["resource"]:
        if rtype == "google_project_iam_member":
            roles = {g["role"] for g in secrets_stack["resource"][rtype].values()}
            assert roles == {"roles/logging.logWriter", "roles/monitoring.metricWriter"}
            continue
        assert not rtype.startswith("google_project_iam"), rtype
        assert not rtype.endswith(("_iam_binding", "_iam_policy")), rtype


def test_the_only_project_level_iam_is_the_deadline_jobs_delete(synth: Synthesizer) -> None:
    """Secrets and the cache bucket are granted on themselves. A spot or on-demand node's
    deadline job needs tpu.nodes.delete, which Cloud TPU grants at project level only: one
    custom role with that permission (the secrets stack), bound to the stop account by the node
    stack with the job, conditioned on the deadline (issue 36 item 10), and nothing else but
    the node account's log and metric writers (issue 38: no condition narrows them)."""
    for overrides in ALL:
        stacks = synth(overrides)
        roles = resources(stacks[f"{NAME}-secrets"], "google_project_iam_custom_role").values()
        role = next(iter(roles), {})
        for name, stack in stacks.items():
            found = stack.get("resource", {})
            iam = sorted(t for t in found if t.startswith("google_project_iam"))
            if not iam:
                continue
            if name.endswith("-secrets"):
                writers = found.pop("google_project_iam_member", {})
                assert {g["role"] for g in writers.values()} == {
                    "roles/logging.logWriter",
                    "roles/monitoring.metricWriter",
                }, name
                iam = sorted(t for t in found if t.startswith("google_project_iam"))
                if not iam:  # flex-start: no deadline job, no role
                    continue
                assert iam == ["google_project_iam_custom_role"], name
                assert [role] == list(found["google_project_iam_custom_role"].values())
                assert role["permissions"] == ["tpu.nodes.delete"], name
                continue
            assert iam == ["google_project_iam_member"], name
            (grant,) = found["google_project_iam_member"].values()
            assert (
                grant["member"]
                == f"serviceAccount:{NAME}-stop@${{var.project}}.iam.gserviceaccount.com"
            )
            assert grant["role"].endswith(f"/roles/{role['role_id']}")
            assert "request.time <" in grant["condition"]["expression"]


def test_required_services_kept_on_destroy(secrets_stack: dict[str, Any]) -> None:
    services = resources(secrets_stack, "google_project_service")
    assert {s["service"] for s in services.values()} >= {
        "tpu.googleapis.com",
        "secretmanager.googleapis.com",
        "iam.googleapis.com",
        "compute.googleapis.com",
    }
    for svc in services.values():
        assert svc["disable_on_destroy"] is False, svc["service"]


def test_the_node_account_writes_logs_and_metrics_and_nothing_more(
    secrets_stack: dict[str, Any],
) -> None:
    """The Ops Agent on the TPU VM writes as the node's account (issue 38): the two writer roles
    Google's install page names, on the project (no condition can narrow them:
    tpudeploy/opsagent.py), and no other project role."""
    grants = [
        g
        for g in resources(secrets_stack, "google_project_iam_member").values()
        if "google_service_account.node-sa.email" in g["member"]
    ]
    assert sorted(g["role"] for g in grants) == [
        "roles/logging.logWriter",
        "roles/monitoring.metricWriter",
    ]
    assert not [g for g in grants if "condition" in g]


# --- outputs, variable, provider ---------------------------------------------------------------


def test_node_outputs(spot_node: dict[str, Any]) -> None:
    outputs = spot_node["output"]
    assert {"node_name", "zone", "ip", "endpoint"} <= set(outputs)
    assert outputs["node_name"]["value"] == NAME
    assert outputs["zone"]["value"] == "us-west4-a"
    ip = outputs["ip"]["value"]
    assert ip.startswith("${google_tpu_v2_vm.node.network_endpoints")
    assert outputs["endpoint"]["value"] == f"https://{ip}:8443/v1"


def test_project_variable_without_a_default_when_unset(synth: Synthesizer) -> None:
    for name, stack in synth(DEFAULT).items():
        var = stack["variable"]["project"]
        assert "default" not in var, name
        assert var["type"] == "string"
        assert any("var.project" in v["condition"] for v in var["validation"]), name
        assert all(v["error_message"] for v in var["validation"])
        assert stack["provider"]["google-beta"][0]["project"] == "${var.project}"


def test_project_variable_defaults_to_the_configured_project(synth: Synthesizer) -> None:
    for name, stack in synth(OPEN_TO).items():
        var = stack["variable"]["project"]
        assert var["default"] == "my-proj-123", name
        assert var["validation"], name


def test_one_provider_google_beta_in_the_seeds_region(synth: Synthesizer) -> None:
    for name, stack in synth(DEFAULT).items():
        assert set(stack["terraform"]["required_providers"]) == {"google-beta"}, name
        (provider,) = stack["provider"]["google-beta"]
        assert provider["region"] == "us-west4"
        assert provider["zone"] == "us-west4-a"
        assert "google" not in stack["provider"]


# --- secrets hygiene and determinism -----------------------------------------------------------

TOKEN_SHAPED = re.compile(r"hf_[A-Za-z0-9]{30,}")
# HF_TOKEN= followed by a literal value, quoted or not. Handing it over from a shell variable
# (HF_TOKEN="$hf_token") is how the script keeps it off every command line: that is allowed.
HF_TOKEN_VALUE = re.compile(r"""HF_TOKEN=["']?(?!\$)[^\s"'\\$]""")


@pytest.mark.parametrize("overrides", ALL, ids=["flex", "spot", "od", "open"])
def test_no_token_in_the_synthesized_json(synth: Synthesizer, overrides: dict[str, Any]) -> None:
    for name, stack in synth(overrides).items():
        for text in strings(stack):
            assert not TOKEN_SHAPED.search(text), name
            found = HF_TOKEN_VALUE.search(text)
            assert not found, (name, text[max(0, found.start() - 80) : found.end() + 80])


# What the subprocess synth below reads: a project, otherwise the default (flex-start) deployment.
MAIN_PY = {"project": "my-proj-123"}


def _main_py_with_secrets_around(
    tmp_path_factory: pytest.TempPathFactory, *, eager: bool
) -> tuple[subprocess.CompletedProcess[str], Path, tuple[str, str]]:
    """`python main.py` as `make synth` runs it, with real-looking secrets everywhere a careless
    renderer could pick them up (the environment, the Hugging Face token file). `eager` imports
    the provider packages the way they ship (every resource module: stacks/__init__.py's
    EAGER_PROVIDERS_ENV) where `make synth` and the session's synths import them bare."""
    token = "hf_" + secrets.token_hex(17)
    api_key = secrets.token_urlsafe(32)
    tmp_path = tmp_path_factory.mktemp("main-py")
    home = tmp_path / "home"
    (home / ".cache" / "huggingface").mkdir(parents=True)
    (home / ".cache" / "huggingface" / "token").write_text(token)
    with pytest.MonkeyPatch.context() as env:
        for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
            env.setenv(var, token)
        env.setenv("VLLM_API_KEY", api_key)
        env.setenv("HOME", str(home))
        if eager:
            env.setenv(EAGER_PROVIDERS_ENV, "1")
        else:
            env.delenv(EAGER_PROVIDERS_ENV, raising=False)
        # The eager import alone is ~20 s of CPU (25 s idle, over 120 s on a loaded machine):
        # the slow tier's; the bare one ~7 s.
        result, outdir = run_main(
            tmp_path, f"project = {json.dumps(MAIN_PY['project'])}\n", timeout=600
        )
    return result, outdir, (token, api_key)


@pytest.fixture(scope="module")
def main_py_with_secrets_around(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path, tuple[str, str]]:
    """`make synth`'s own run (bare provider import), once for the tests below."""
    return _main_py_with_secrets_around(tmp_path_factory, eager=False)


def test_secrets_within_reach_of_the_synth_never_reach_its_output(
    main_py_with_secrets_around: tuple[subprocess.CompletedProcess[str], Path, tuple[str, str]],
) -> None:
    """Synthesized with secrets within reach (the fixture above), none of them is in any output
    file. Without them present, the scan above could never fail."""
    result, outdir, (token, api_key) = main_py_with_secrets_around
    assert result.returncode == 0, result.stderr
    files = [p for p in outdir.rglob("*") if p.is_file()]
    assert any(p.name == "cdk.tf.json" for p in files)
    for path in files:
        text = path.read_text(errors="replace")
        assert token not in text and api_key not in text, path
    assert token not in result.stdout + result.stderr
    assert api_key not in result.stdout + result.stderr


@pytest.mark.slow_tier
def test_the_bare_provider_import_synthesizes_what_the_eager_one_does(
    tmp_path_factory: pytest.TempPathFactory, synth: Synthesizer
) -> None:
    """stacks/__init__.py registers the provider packages bare (12 s of CPU less per synth):
    main.py with the packages' own eager import writes the same JSON as this process, and,
    secrets within reach, leaks none of them either. In the slow tier (make test-slow): the eager
    import is 20 s of CPU, and what it guards changes only with the pinned bindings."""
    result, outdir, (token, api_key) = _main_py_with_secrets_around(tmp_path_factory, eager=True)
    for path in (p for p in outdir.rglob("*") if p.is_file()):
        text = path.read_text(errors="replace")
        assert token not in text and api_key not in text, path
    assert result.returncode == 0, result.stderr
    ours = synth(MAIN_PY)
    # This process imported the bindings bare: a module no stack uses was never loaded.
    assert "cdktf_cdktf_provider_google_beta.google_workflows_workflow" not in sys.modules
    # Same depth below the same temporary root: the flex-start provisioners' working_dir is the
    # repository root relative to the output directory.
    assert outdir.parents[1] == synth.outdir(MAIN_PY).parents[1]
    assert sorted(ours) == sorted(p.parent.name for p in outdir.glob("stacks/*/cdk.tf.json"))
    for name, stack in ours.items():
        written = json.loads((outdir / "stacks" / name / "cdk.tf.json").read_text())
        assert written == stack, name


def test_token_patterns_would_catch_a_baked_in_token() -> None:
    # The hygiene assertions above can fail: these are the shapes they refuse.
    assert TOKEN_SHAPED.search("hf_" + "a1B2" * 9)
    assert HF_TOKEN_VALUE.search("-e HF_TOKEN=hf_abc")
    assert HF_TOKEN_VALUE.search("-e 'HF_TOKEN=xyz'")
    assert HF_TOKEN_VALUE.search("export HF_TOKEN='xyz'")
    assert HF_TOKEN_VALUE.search('HF_TOKEN="xyz" docker run')
    assert not HF_TOKEN_VALUE.search('HF_TOKEN="$hf_token" docker run')
    assert not HF_TOKEN_VALUE.search("-e HF_TOKEN -e HF_HOME=/dev/shm")
    # ... and they see inside the JSON the flex-start resource carries.
    doc = {"input": json.dumps({"startup_script": "HF_TOKEN=hf_" + "x" * 34})}
    assert any(TOKEN_SHAPED.search(t) for t in strings(doc))


def test_names_derive_from_the_deployment_name(synth: Synthesizer) -> None:
    cfg = parse_config(SPOT)
    stacks = synth(SPOT)
    assert set(stacks) == {cfg.secrets_stack_name, cfg.node_stack_name}
    names = [rule["name"] for rule in resources(stacks[NODE], "google_compute_firewall").values()]
    names.append(only(stacks[NODE], "google_tpu_v2_vm")["name"])
    names += [
        s["secret_id"] for s in resources(stacks[SECRETS], "google_secret_manager_secret").values()
    ]
    names += [
        a["account_id"] for a in resources(stacks[SECRETS], "google_service_account").values()
    ]
    for n in names:
        # The deployment's name itself (the node), or it with a suffix: never random.
        assert re.fullmatch(rf"{NAME}(-[a-z0-9-]+)?", n), n
    for stack in stacks.values():
        assert not any(t.startswith("random_") for t in stack.get("resource", {}))


def test_synthesis_is_deterministic(synth: Synthesizer, tmp_path_factory: Any) -> None:
    # A second, independent synthesis gives identical stacks: nothing random, no timestamps.
    from stacks.app import build_app

    # Same depth as the session's output: the flex-start provisioners' working_dir is the
    # repository root relative to the output directory.
    for overrides in (DEFAULT, SPOT):
        outdir = tmp_path_factory.mktemp("again") / synth.outdir(overrides).name
        build_app(parse_config(overrides), outdir=str(outdir)).synth()
        for name, stack in synth(overrides).items():
            path = outdir / "stacks" / name / "cdk.tf.json"
            assert json.loads(path.read_text(encoding="utf-8")) == stack, name
