"""GKE: the front door's access log reaches Cloud Logging as jsonPayload (issue 38).

GKE's built-in agent sends what a container writes to stdout and stderr to Cloud Logging
(cloud.google.com/logging/docs/structured-logging: "Some Google Cloud services contain an
integrated logging agent that sends the data written to stdout or stderr as logs to Cloud
Logging ... Google Kubernetes Engine"), and a line that is one serialized JSON object becomes the
entry's jsonPayload (that page's agent section; not in the stored excerpt, so this rests on the
issue's reading). So each access line must be exactly one JSON object on stdout, whatever a
client sends; the error log stays on stderr, unstructured.
"""

from __future__ import annotations

import json
import re

from tpudeploy import frontdoor_log
from tpudeploy.gke import accesslog, pod
from tpudeploy.logsources import GKE_CONTAINERS
from tpudeploy.platform import parse_config

CFG = parse_config({"platform": "gke", "project": "logs-proj-1"}, source="test")


def test_the_access_log_is_one_json_object_per_line_on_stdout() -> None:
    conf = pod.scripts(CFG)[pod.NGINX_CONF]
    (fmt,) = re.findall(r"log_format usage escape=json '([^']*)';", conf)
    assert re.findall(r"^\s*access_log (\S+) (\S+);", conf, re.M) == [("/dev/stdout", "usage")]
    # nginx's escape=json writes a variable's quote, backslash and newline as \", \\ and \n: a
    # hostile path or client name still leaves one object on one line.
    hostile = 'a"b\\c\nd'
    escaped = json.dumps(hostile)[1:-1]
    line = fmt
    for field in frontdoor_log.ACCESS_LOG_FIELDS:
        value = escaped if field.kind == "text" else "1"
        line = line.replace(field.variable, value, 1)
    assert "\n" not in line
    entry = json.loads(line)
    assert isinstance(entry, dict) and tuple(entry) == frontdoor_log.FIELD_NAMES
    assert entry["path"] == hostile
    # The error log goes to stderr, never into the structured stream.
    assert pod.nginx_command()[-2:] == ["-e", "stderr"]
    assert not re.search(r"^\s*error_log\s+/dev/stdout", conf, re.M)


def test_the_contract_names_the_pods_containers() -> None:
    assert GKE_CONTAINERS == {
        "vllm": pod.VLLM_CONTAINER,
        "frontdoor": accesslog.FRONTDOOR_CONTAINER,
    }
