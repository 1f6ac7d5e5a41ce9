"""Speculative decoding's acceptance rate, per cell of the sweep.

vLLM counts the draft tokens its speculator proposes and those the target model accepts
(vllm/v1/spec_decode/metrics.py: `vllm:spec_decode_num_draft_tokens`,
`vllm:spec_decode_num_accepted_tokens`, both counters, so Prometheus exposes them with the
`_total` suffix). The cell's own command reads both from the server's /metrics before and after
its `vllm bench serve` and merges the growth into the cell's result JSON (SPEC_KEYS), so a
verdict can show the acceptance rate beside the throughput it bought, cell by cell: at 1 client
a draft rides on idle compute, at 64 every rejected token costs a full batch slot.

The snippet runs inside the serving container with its own python3 (standard library only).
"""

from __future__ import annotations

from typing import Final

# The pinned vLLM's names (tpudeploy/gke/vllm_metrics.json; a test fails when one is renamed).
DRAFT_METRIC: Final = "vllm:spec_decode_num_draft_tokens"
ACCEPTED_METRIC: Final = "vllm:spec_decode_num_accepted_tokens"
# RunResult field -> the key the sweep writes into the result JSON.
SPEC_KEYS: Final = {
    "spec_drafted": "tpudeploy_spec_draft_tokens",
    "spec_accepted": "tpudeploy_spec_accepted_tokens",
}

# `python3 -c SNIPPET scrape URL` prints the two counters' totals as JSON ({} when /metrics
# cannot be read); `python3 -c SNIPPET merge RESULT URL BEFORE` adds their growth since BEFORE to
# the result file. A server without speculative decoding exposes neither: nothing is merged.
SNIPPET: Final = f"""
import json, sys, urllib.request
NAMES = {{"{DRAFT_METRIC}_total": "{SPEC_KEYS["spec_drafted"]}",
         "{ACCEPTED_METRIC}_total": "{SPEC_KEYS["spec_accepted"]}"}}
def totals(url):
    try:
        text = urllib.request.urlopen(url, timeout=10).read().decode()
    except Exception:
        return {{}}
    out = {{}}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name = line.split("{{", 1)[0].split(" ", 1)[0]
        if name in NAMES:
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out
if sys.argv[1] == "scrape":
    print(json.dumps(totals(sys.argv[2])))
else:
    before, after = json.loads(sys.argv[4] or "{{}}"), totals(sys.argv[3])
    grown = {{NAMES[n]: int(after[n] - before.get(n, 0.0)) for n in after if n in before}}
    if grown:
        with open(sys.argv[2]) as f:
            result = json.load(f)
        result.update(grown)
        with open(sys.argv[2], "w") as f:
            json.dump(result, f)
"""


def metrics_url(host: str, port: int) -> str:
    """The server's /metrics as the cell's client reaches it (the same host and port)."""
    return f"http://{host}:{port}/metrics"
