"""What was deployed against what the checkout would deploy, for one node resource.

`make recover` (and the recover workflow) re-creates a dead node through Terraform, which
applies the checkout's configuration. A node change that the environment gate refused (or that
no one deployed yet) would reach the node at its next preemption that way (issue 22). Terraform's
state records what the last apply deployed; the synthesized stack holds what the checkout would
create. This compares the two, attribute by attribute, so recover can refuse a difference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Keys of a resource block that belong to Terraform itself, not to the resource.
_META = {"//", "count", "for_each", "depends_on", "provider", "lifecycle", "provisioner"}
_META |= {"connection", "timeouts"}


def _reference(value: Any) -> bool:
    """A value Terraform computes at plan time (`${...}`): not comparable before a plan."""
    return "${" in json.dumps(value)


def _scalar(value: Any) -> str:
    """One spelling per value: 1 and "1" alike (state types what the JSON may quote), objects
    and lists canonical."""
    if isinstance(value, (bool, dict, list)) or value is None:
        return json.dumps(value, sort_keys=True)
    return str(value)


def differences(planned: dict[str, Any], deployed: dict[str, Any], prefix: str = "") -> list[str]:
    """Attribute paths where the checkout's block differs from the state's values. A nested
    block (a list of objects in state) is compared on the keys the checkout sets; a map (labels,
    metadata) and a list of values compare whole."""
    out: list[str] = []
    for key, want in sorted(planned.items()):
        if key in _META or _reference(want):
            continue
        have = deployed.get(key)
        path = f"{prefix}{key}"
        if isinstance(want, dict) and isinstance(have, list) and len(have) == 1:
            have = have[0]  # one nested block: state keeps it as a list of one
            if isinstance(have, dict):
                out += differences(want, have, f"{path}.")
                continue
        if (
            isinstance(want, list)
            and isinstance(have, list)
            and len(want) == len(have)
            and all(isinstance(w, dict) for w in want)
            and all(isinstance(h, dict) for h in have)
        ):
            for i, (w, h) in enumerate(zip(want, have, strict=True)):
                out += differences(w, h, f"{path}[{i}].")
            continue
        if isinstance(want, dict) and isinstance(have, dict):
            same = {k: _scalar(v) for k, v in want.items()} == {
                k: _scalar(v) for k, v in have.items()
            }
        elif isinstance(want, list) and isinstance(have, list):
            same = [_scalar(v) for v in want] == [_scalar(v) for v in have]
        else:
            same = _scalar(want) == _scalar(have)
        if not same:
            out.append(path)
    return out


def planned_block(stack_dir: Path, address: str) -> dict[str, Any]:
    """The resource block at `address` in the synthesized stack (cdk.tf.json)."""
    path = stack_dir / "cdk.tf.json"
    kind, _, name = address.partition(".")
    try:
        block = json.loads(path.read_text(encoding="utf-8"))["resource"][kind][name]
    except (OSError, ValueError, KeyError) as exc:
        raise LookupError(f"{path} has no {address} ({exc})") from None
    if not isinstance(block, dict):
        raise LookupError(f"{path}: {address} is not a resource block")
    return block


def deployed_values(show: dict[str, Any], address: str) -> dict[str, Any] | None:
    """The values Terraform's state holds for `address` (`terraform show -json`), or None."""
    root = (show.get("values") or {}).get("root_module") or {}
    for resource in root.get("resources") or []:
        if resource.get("address") == address:
            values = resource.get("values")
            return values if isinstance(values, dict) else {}
    return None
