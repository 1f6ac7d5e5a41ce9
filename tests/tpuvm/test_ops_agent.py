"""The TPU VM's Ops Agent: what its config ships (logs of the issue-38 contract, vLLM's metrics on
loopback), what the boot writes for it, and that it carries no secret (tpudeploy/opsagent.py,
templates/_telemetry.sh.j2)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests import boot_logs
from tests.boot_sandbox import PROJECT, SECRETS, Boot, Node
from tools.rehearsal.fakes.opsagent_rules import refusals
from tpudeploy import frontdoor_log, opsagent
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.logsources import DEPLOYMENT_LABEL, TPUVM_LOG_IDS, deployment_filter

LOOPBACK = ("127.0.0.1", "localhost", "::1")
# Prometheus scrape settings that would send a credential with every scrape.
AUTH_KEYS = frozenset(
    {"authorization", "basic_auth", "bearer_token", "bearer_token_file", "oauth2"}
)


@pytest.fixture(scope="module")
def cfg() -> DeployConfig:
    return parse_config({"project": PROJECT})


@pytest.fixture(scope="module")
def default_boot(tmp_path_factory: pytest.TempPathFactory, cfg: DeployConfig) -> tuple[Node, Boot]:
    node = Node(tmp_path_factory.mktemp("ops-agent-boot"), cfg)
    return node, node.run()


def scrape_targets(config: dict[str, Any]) -> list[str]:
    return [
        target
        for receiver in config["metrics"]["receivers"].values()
        for sc in receiver["config"]["scrape_configs"]
        for group in sc["static_configs"]
        for target in group["targets"]
    ]


def keys_anywhere(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys_anywhere(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys_anywhere(v)}
    return set()


def test_the_agent_starts_on_the_config_and_refuses_what_it_refuses(cfg: DeployConfig) -> None:
    config = opsagent.agent_config(cfg)
    assert refusals(config) == []
    scrape = config["metrics"]["receivers"][opsagent.METRICS_RECEIVER]["config"]
    for change, why in (
        ({"honor_labels": True}, "honor_labels is not supported"),
        ({"file_sd_configs": [{"files": ["x.json"]}]}, "unsupported service discovery"),
        ({"relabel_configs": [{"target_label": "cluster"}]}, "cannot rename cluster"),
    ):
        bad = copy.deepcopy(config)
        bad_scrape = bad["metrics"]["receivers"][opsagent.METRICS_RECEIVER]["config"]
        bad_scrape["scrape_configs"][0].update(change)
        assert any(why in r for r in refusals(bad)), change
    assert scrape["scrape_configs"][0]["static_configs"]
    broken = copy.deepcopy(config)
    broken["logging"]["service"]["pipelines"]["tpudeploy-boot"]["processors"].append("nope")
    assert refusals(broken) == ["logging pipeline tpudeploy-boot: no processor nope"]


def test_vllm_is_scraped_on_loopback_under_the_deployments_job(cfg: DeployConfig) -> None:
    config = opsagent.agent_config(cfg)
    assert scrape_targets(config) == [f"127.0.0.1:{cfg.vllm.port}"]
    (scrape,) = config["metrics"]["receivers"][opsagent.METRICS_RECEIVER]["config"][
        "scrape_configs"
    ]
    # The dashboard's TPU VM selector (TpuVm.metrics_selector) reads job="<name>".
    assert scrape["job_name"] == cfg.name and scrape["metrics_path"] == "/metrics"
    assert scrape["scrape_interval"] == "15s"
    assert not AUTH_KEYS & keys_anywhere(config)


def test_only_the_contracts_logs_ship_each_labelled_with_its_deployment(cfg: DeployConfig) -> None:
    logging = opsagent.agent_config(cfg)["logging"]
    pipelines = logging["service"]["pipelines"]
    # The built-in syslog pipeline is off: nothing but the three logs leaves the node.
    assert pipelines.pop("default_pipeline") == {"receivers": []}
    assert set(pipelines) == set(logging["receivers"]) == set(TPUVM_LOG_IDS.values())
    for what, log_id in TPUVM_LOG_IDS.items():
        receiver = logging["receivers"][log_id]
        assert receiver == {"type": "files", "include_paths": [f"/var/log/tpudeploy/{what}.log"]}
        assert pipelines[log_id]["receivers"] == [log_id]
        assert pipelines[log_id]["processors"][-1] == "tpudeploy-label"
    fields = logging["processors"]["tpudeploy-label"]["fields"]
    assert fields == {f'labels."{DEPLOYMENT_LABEL}"': {"static_value": cfg.name}}
    assert deployment_filter(cfg.name) == f'labels.{DEPLOYMENT_LABEL}="{cfg.name}"'


def _agent_pipeline(config: dict[str, Any], log_id: str, lines: list[str]) -> list[dict[str, Any]]:
    """The entries the agent makes of a file's lines under the config's pipeline, for the
    processor types the config uses: parse_json (its `field`, default message, parsed into
    jsonPayload), exclude_logs on `jsonPayload.FIELD = "VALUE"`, modify_fields' labels."""
    logging = config["logging"]
    entries = []
    for line in lines:
        entry: dict[str, Any] = {"jsonPayload": {"message": line}, "labels": {}}
        for name in logging["service"]["pipelines"][log_id]["processors"]:
            step = logging["processors"][name]
            if step["type"] == "parse_json":
                payload = entry["jsonPayload"]
                parsed = json.loads(payload.pop(step.get("field", "message")))
                assert isinstance(parsed, dict), "the line is not one JSON object"
                payload.update(parsed)
            elif step["type"] == "exclude_logs":
                dropped = False
                for rule in step["match_any"]:
                    field, _, value = rule.partition(" = ")
                    key = field.removeprefix("jsonPayload.")
                    dropped |= entry["jsonPayload"].get(key) == json.loads(value)
                if dropped:
                    break
            elif step["type"] == "modify_fields":
                for field, spec in step["fields"].items():
                    entry["labels"][field.removeprefix("labels.").strip('"')] = spec["static_value"]
            else:
                raise AssertionError(f"a processor type this test does not model: {step['type']}")
        else:
            entries.append(entry)
    return entries


def test_the_front_door_log_ships_its_access_lines_only(cfg: DeployConfig) -> None:
    """docker's json-file lines of the proxy: its access lines on stdout (frontdoor_log.py's
    fields, no key, no prompt) ship as jsonPayload; nginx's error log on stderr, which quotes
    request lines and client addresses, never does."""
    access = {f.name: ("-" if f.kind == "text" else 0) for f in frontdoor_log.ACCESS_LOG_FIELDS}
    access.update(client="team-a", path="/v1/chat/completions", status=200)
    docker_lines = [
        json.dumps({"log": json.dumps(access) + "\n", "stream": "stdout", "time": "t"}),
        json.dumps(
            {
                "log": '2026/12/03 [error] 29#29: *1 upstream timed out, request: "POST '
                '/v1/chat/completions?x=1 HTTP/1.1"\n',
                "stream": "stderr",
                "time": "t",
            }
        ),
    ]
    config = opsagent.agent_config(cfg)
    shipped = _agent_pipeline(config, TPUVM_LOG_IDS["frontdoor"], docker_lines)
    assert len(shipped) == 1
    payload = shipped[0]["jsonPayload"]
    names = {f.name for f in frontdoor_log.ACCESS_LOG_FIELDS}
    # The docker envelope's stream and time stay beside the access fields; nothing else does.
    assert set(payload) - {"stream", "time"} == names - {"time"}
    assert shipped[0]["labels"] == {DEPLOYMENT_LABEL: cfg.name}
    # The receiver reads the proxy's link and nothing else.
    receiver = config["logging"]["receivers"][TPUVM_LOG_IDS["frontdoor"]]
    assert receiver["include_paths"] == [opsagent.log_path("frontdoor")]


def test_two_deployments_ship_apart(cfg: DeployConfig) -> None:
    other = parse_config({"project": PROJECT, "name": "gemma4-b", "vllm": {"port": 8001}})
    a, b = opsagent.render_config(cfg), opsagent.render_config(other)
    assert cfg.name not in b and other.name not in a
    assert (
        json.loads(b)["metrics"]["receivers"][opsagent.METRICS_RECEIVER]["config"][
            "scrape_configs"
        ][0]["job_name"]
        == "gemma4-b"
    )


def test_the_boot_writes_the_agent_config_and_it_carries_no_secret(
    default_boot: tuple[Node, Boot], cfg: DeployConfig
) -> None:
    node, boot = default_boot
    assert boot.returncode == 0, boot.stderr
    written = json.loads(node.ops_agent_config.read_text())
    assert written == opsagent.agent_config(cfg)
    for target in scrape_targets(written):
        assert urlsplit(f"http://{target}").hostname in LOOPBACK
    text = node.ops_agent_config.read_text()
    for secret in (*SECRETS, *node.client_keys(), *node.tls_key_lines()):
        assert secret not in text
    assert not AUTH_KEYS & keys_anywhere(written)
    node.assert_no_secret_leaked(boot)
    assert ["restart", opsagent.AGENT_UNIT] in [c["argv"] for c in node.calls("systemctl")]


def test_the_agent_reads_each_containers_docker_log(default_boot: tuple[Node, Boot]) -> None:
    node, _ = default_boot
    for what, container in (
        ("vllm", node.cfg.vllm.container_name),
        ("frontdoor", node.cfg.proxy.container_name),
    ):
        link = node.log_dir / opsagent.LOG_FILES[what]
        assert link.is_symlink() and link.readlink() == node.stub_dir / f"{container}-json.log"


def test_each_phase_is_one_structured_entry_per_event(default_boot: tuple[Node, Boot]) -> None:
    node, _ = default_boot
    entries = node.boot_entries()
    phases = [(e["phase"], e["event"]) for e in entries]
    for phase in ("setup", "reading-secrets", "pulling-image", "restoring-cache", "starting-vllm"):
        assert phases.index((phase, "start")) < phases.index((phase, "end"))
    assert ("ops-agent", "end") in phases and phases[-1] == ("boot", "end")
    assert all(isinstance(e["elapsed_s"], int) and e["elapsed_s"] >= 0 for e in entries)
    (check,) = [e for e in entries if e["phase"] == "bootcheck"]
    assert check["ok"] is True and check["disagree"] == []


@pytest.fixture(scope="module")
def odd_boot(tmp_path_factory: pytest.TempPathFactory, cfg: DeployConfig) -> tuple[Node, Boot]:
    """One boot with both oddities (a boot is seconds of CPU): the installer cannot be fetched,
    and vLLM's log disagrees with the planner's KV pool."""
    log = boot_logs.vllm_log(blocks=4500)
    node = Node(
        tmp_path_factory.mktemp("odd-boot"), cfg, downloads={}, logs={cfg.vllm.container_name: log}
    )
    return node, node.run()


def test_a_boot_that_disagrees_with_the_planner_says_what(odd_boot: tuple[Node, Boot]) -> None:
    node, boot = odd_boot
    assert boot.returncode == 0, boot.stderr
    (check,) = [e for e in node.boot_entries() if e["phase"] == "bootcheck"]
    assert check["ok"] is False
    assert [d.split(":")[0] for d in check["disagree"]] == ["kv-pool"]


def test_a_failed_phase_is_a_fail_entry_with_its_reason(tmp_path: Path, cfg: DeployConfig) -> None:
    node = Node(tmp_path, cfg, secrets={})
    assert node.run().returncode != 0
    last = node.boot_entries()[-1]
    assert (last["phase"], last["event"]) == ("reading-secrets", "fail")
    assert "make secret" in last["reason"]


def test_an_agent_that_cannot_install_is_said_and_the_node_serves(
    odd_boot: tuple[Node, Boot],
) -> None:
    node, boot = odd_boot
    assert boot.returncode == 0, boot.stderr
    assert "could not install the Ops Agent" in boot.stderr
    assert not node.ops_agent_config.exists()
    assert {"phase": "ops-agent", "event": "fail"}.items() <= next(
        e for e in node.boot_entries() if e["phase"] == "ops-agent" and e["event"] != "start"
    ).items()


# docker's json-file driver (docs.docker.com/engine/logging/drivers/json-file/): "max-size: The
# maximum size of the log before it is rolled. A positive integer plus a modifier representing
# the unit of measure (k, m, or g)"; "max-file: The maximum number of log files that can be
# present. ... A positive integer. Only effective when max-size is also set." Unset, both are
# unlimited: a front door logging every request of a team's agents fills the boot disk.
DOCKER_MAX_SIZE = re.compile(r"[1-9][0-9]*[kmg]")
DOCKER_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3}


def test_each_containers_docker_log_is_capped(default_boot: tuple[Node, Boot]) -> None:
    node, _ = default_boot
    runs = {call["run"]["name"]: call["argv"] for call in node.docker("run")}
    total = 0
    for container in (node.cfg.vllm.container_name, node.cfg.proxy.container_name):
        argv = runs[container]
        opts = dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "--log-opt")
        assert set(opts) == {"max-size", "max-file"}, (container, opts)
        assert DOCKER_MAX_SIZE.fullmatch(opts["max-size"]), opts
        assert int(opts["max-file"]) >= 2, opts  # one file would drop the whole log at a roll
        size = int(opts["max-size"][:-1]) * DOCKER_UNITS[opts["max-size"][-1]]
        total += size * int(opts["max-file"])
    # Both logs together stay a small share of a 100 GB boot disk, and the one the make check
    # names (opsagent.container_log_bytes) is what docker is told.
    assert total == 2 * opsagent.container_log_bytes() <= 2 * 1024**3
