"""The TPU VM node's Google Cloud Ops Agent configuration: the logs and vLLM's metrics it ships.

What the agent ships is exactly the log contract (tpudeploy/logsources.py) and vLLM's /metrics,
nothing else: the built-in syslog and host-metric pipelines are turned off, so a line some other
program writes to syslog never reaches Cloud Logging. Rendered by tpudeploy/render.py as JSON,
which is YAML (YAML 1.2 is a superset of JSON; the agent reads its config.yaml with a YAML 1.2
parser, goccy/go-yaml), so that the node's python3 and the rehearsal's stand-ins read it with the
standard library. Sources:

- config file and merge: "Place your Ops Agent configuration in /etc/google-cloud-ops-agent/
  config.yaml ... merged with the built-in configuration when the agent restarts"; a built-in
  pipeline is replaced by redefining its id, and `receivers: []` turns it off
  (cloud.google.com/monitoring/agent/ops-agent/configuration).
- Prometheus receiver: scraped series are "ingested into Cloud Monitoring as
  prometheus.googleapis.com metrics", the same store GKE's Managed Prometheus writes
  (cloud.google.com/monitoring/agent/ops-agent/prometheus; the stored copy quotes it in its
  translations only), so the dashboard's PromQL reads both; the agent accepts static_configs
  only (GoogleCloudPlatform/ops-agent confgenerator/prometheus.go, validatePrometheus).
- logs: a files receiver's entries take the receiver's id as their log name (the agent's
  generated configuration sets logging.googleapis.com/logName to it: ops-agent confgenerator);
  parse_json makes a JSON line jsonPayload; modify_fields sets labels."KEY" to a static_value
  (confgenerator/logging_modify_fields.go); entries are written against the host's
  gce_instance resource (confgenerator/fluentbit/outputs.go: "resource": "gce_instance"). No
  Google page in the stored documentation names the TPU VM among the agent's supported VMs
  (cloud.google.com/tpu/docs/monitor-tpu documents the TPU runtime's own metrics only): that
  the agent installs and runs on the TPU runtime image rests on the issue's reading.
"""

from __future__ import annotations

import json
from typing import Any

from tpudeploy.config import DeployConfig
from tpudeploy.logsources import DEPLOYMENT_LABEL, TPUVM_LOG_IDS

# The node account's project roles for what the agent writes (issue 38: only these two). The
# install page: "By default, the Ops Agent uses the Compute Engine service account, and that
# service account has the roles necessary for writing logs and metrics: Logs Writer
# (roles/logging.logWriter) and Monitoring Metric Writer (roles/monitoring.metricWriter)"
# (cloud.google.com/logging/docs/agent/ops-agent/installation); the node runs as its own
# account, which holds neither until granted. Project grants, unconditioned: entries.write and
# timeSeries.create are checked on the project the log or series belongs to, and a project gives
# IAM Conditions its type and service, never a name ("Resource attributes are available for the
# Google Cloud services and resource types that are listed on this page. Other services and
# resource types do not recognize resource attributes", cloud.google.com/iam/docs/
# conditions-resource-attributes; tools/rehearsal/fakes/iamrules.py ATTRIBUTES[PROJECT]), so no
# condition can narrow either role to one deployment's logs or series (docs/security.md).
NODE_PROJECT_ROLES = ("roles/logging.logWriter", "roles/monitoring.metricWriter")
CONFIG_PATH = "/etc/google-cloud-ops-agent/config.yaml"
# Google's documented installer (cloud.google.com/logging/docs/agent/ops-agent/installation:
# "curl -sSO https://dl.google.com/cloudagents/add-google-cloud-ops-agent-repo.sh; sudo bash
# add-google-cloud-ops-agent-repo.sh --also-install"), pinned to the agent's major version 2 so
# that a new major never reaches a node unread.
INSTALLER_URL = "https://dl.google.com/cloudagents/add-google-cloud-ops-agent-repo.sh"
INSTALLER_ARGS = ("--also-install", "--version=2.*.*")
AGENT_UNIT = "google-cloud-ops-agent"
# Where the node keeps what the agent reads: the boot's own structured lines, and a link to each
# container's docker log (docker's json-file driver, one {"log", "stream", "time"} object per
# line; the link is renewed whenever the container is). On the boot disk: none of it is a secret
# (the boot sandbox proves it, tests/tpuvm/test_ops_agent_boot.py).
LOG_DIR = "/var/log/tpudeploy"
LOG_FILES = {"vllm": "vllm.log", "frontdoor": "frontdoor.log", "boot": "boot.log"}
# docker's json-file driver keeps a container's output unbounded by default ("max-size: ... -1
# (unlimited)", docs.docker.com/engine/logging/drivers/json-file/). The front door writes one
# access line per request for as long as the node runs (a team's agents all day, `make extend`
# or no deadline at all), so each container's log is capped: at most max-file files of max-size.
# Docker renames a full file and opens a new one under the same path, so the agent's link (the
# LogPath) keeps following the current file, and `docker logs` (the boot check) still reads the
# rotated ones. vLLM's boot output, which the boot check reads, is a few MB, far under the cap.
CONTAINER_LOG_OPTS = {"max-size": "100m", "max-file": "5"}


def container_log_bytes() -> int:
    """The most one container's docker log can hold on the boot disk: max-file x max-size."""
    size = CONTAINER_LOG_OPTS["max-size"]
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    return int(CONTAINER_LOG_OPTS["max-file"]) * int(size[:-1]) * units[size[-1]]


# GKE's PodMonitoring scrapes every 15 s (tpudeploy/gke/manifests.py); the same here keeps the
# dashboard's 5-minute windows at four scrapes or more on both platforms. The agent raises
# anything under 10 s to 10 s (prometheus.go, minScrapeInterval).
SCRAPE_INTERVAL = "15s"
METRICS_RECEIVER = "tpudeploy-vllm-metrics"
# vLLM listens on loopback only (render.VLLM_HOST): the agent scrapes it there, never through
# the front door (which answers /metrics 401 without a key).
SCRAPE_HOST = "127.0.0.1"


def log_path(what: str, log_dir: str = LOG_DIR) -> str:
    return f"{log_dir}/{LOG_FILES[what]}"


def agent_config(cfg: DeployConfig, *, log_dir: str = LOG_DIR) -> dict[str, Any]:
    """The agent's config.yaml for one deployment's node, as data."""
    label = {"fields": {f'labels."{DEPLOYMENT_LABEL}"': {"static_value": cfg.name}}}
    docker_line = ["tpudeploy-docker-line"]
    steps = {
        "vllm": [*docker_line, "tpudeploy-label"],
        # nginx writes its access log to stdout and its error log to stderr (nginx.conf.j2,
        # `-e stderr`): only the access lines ship, each one JSON object (frontdoor_log.py).
        "frontdoor": [
            *docker_line,
            "tpudeploy-stdout-only",
            "tpudeploy-access-line",
            "tpudeploy-label",
        ],
        "boot": ["tpudeploy-boot-line", "tpudeploy-label"],
    }
    return {
        "logging": {
            "receivers": {
                TPUVM_LOG_IDS[what]: {"type": "files", "include_paths": [log_path(what, log_dir)]}
                for what in LOG_FILES
            },
            "processors": {
                "tpudeploy-docker-line": {"type": "parse_json"},
                "tpudeploy-stdout-only": {
                    "type": "exclude_logs",
                    "match_any": ['jsonPayload.stream = "stderr"'],
                },
                "tpudeploy-access-line": {"type": "parse_json", "field": "log"},
                "tpudeploy-boot-line": {"type": "parse_json"},
                "tpudeploy-label": {"type": "modify_fields", **label},
            },
            "service": {
                "pipelines": {
                    "default_pipeline": {"receivers": []},
                    **{
                        TPUVM_LOG_IDS[what]: {
                            "receivers": [TPUVM_LOG_IDS[what]],
                            "processors": steps[what],
                        }
                        for what in LOG_FILES
                    },
                }
            },
        },
        "metrics": {
            "receivers": {
                METRICS_RECEIVER: {
                    "type": "prometheus",
                    "config": {
                        "scrape_configs": [
                            {
                                # The dashboard narrows the TPU VM's series by job="<name>"
                                # (TpuVm.metrics_selector).
                                "job_name": cfg.name,
                                "scrape_interval": SCRAPE_INTERVAL,
                                "metrics_path": "/metrics",
                                "static_configs": [{"targets": [f"{SCRAPE_HOST}:{cfg.vllm.port}"]}],
                            }
                        ]
                    },
                }
            },
            "service": {
                "pipelines": {
                    "default_pipeline": {"receivers": []},
                    METRICS_RECEIVER: {"receivers": [METRICS_RECEIVER]},
                }
            },
        },
    }


def render_config(cfg: DeployConfig) -> str:
    """config.yaml's text: JSON, which is YAML."""
    return json.dumps(agent_config(cfg), indent=2) + "\n"
