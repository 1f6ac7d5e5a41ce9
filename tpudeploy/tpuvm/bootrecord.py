"""`python -m tpudeploy.tpuvm.bootrecord FILE`: the node's boot check, as the node published it,
into FILE (JSON), for `make tune`'s verdict.

The startup script publishes the boot check (tpudeploy/bootcheck.py: what vLLM's boot log says,
the boot's phase timings, the findings) as the tpudeploy/boot-check guest attribute
(tpudeploy/nodebuild.py). `make tune` keeps one per boot beside the sweep's results: the boot
and compile time each arm cost, and the build's own capabilities (KV cache groups, the KV pool,
its dtype), come from the node's own log, never from the config that asked for them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tpudeploy import errors
from tpudeploy.config import DeployConfig, config_path, load_config, require_project
from tpudeploy.nodebuild import CHECK_KEY, parse_check
from tpudeploy.tpuvm.guestattributes import node_attributes
from tpudeploy.tpuvm.queued_resource import TpuApi


def record(cfg: DeployConfig, project: str, out: Path, *, api: TpuApi | None = None) -> int:
    """Write the node's boot check into `out`; 1 (and nothing written) when none is reported."""
    values = node_attributes(cfg, project, api or TpuApi(log=None))
    report = parse_check(values.get(CHECK_KEY, ""))
    if not report:
        print(
            f"no boot check reported by {cfg.node_id} yet (the node publishes it once vLLM "
            "and the proxy are up): nothing recorded",
            file=sys.stderr,
        )
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"boot check: {report.get('verdict', '')}; recorded in {out}")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tpudeploy.tpuvm.bootrecord FILE", file=sys.stderr)
        return 2
    cfg = load_config()
    return record(cfg, require_project(cfg, source=str(config_path())), Path(argv[0]))


if __name__ == "__main__":
    sys.exit(errors.run(lambda: main(sys.argv[1:])))
