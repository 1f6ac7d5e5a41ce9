"""The config models' shared base: strict, frozen, unknown keys refused."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    # Attribute docstrings become field descriptions: the configuration reference in
    # docs/configuration.md is generated from them (tools/readme.py).
    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, use_attribute_docstrings=True
    )
