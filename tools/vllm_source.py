"""What tools/vllm_flags.py and tools/vllm_metrics.py share: the command line that reads a vLLM
source tree (a checkout, or the release wheel's `vllm/` folder unzipped) and prints the JSON
document committed beside the code that reads it, naming the version and the command that
wrote it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def generator_main(
    argv: list[str], usage: str, tool: str, key: str, read: Callable[[Path], dict[str, Any]]
) -> int:
    """`python -m TOOL SOURCE VERSION`: {vllm_version, generated_by, KEY: read(SOURCE)}."""
    if len(argv) != 2:
        print(usage, file=sys.stderr)
        return 2
    root, version = Path(argv[0]), argv[1]
    document = {
        "vllm_version": version,
        "generated_by": f"python -m {tool} <vllm {version} source> {version}",
        key: read(root),
    }
    print(json.dumps(document, indent=1))
    return 0
