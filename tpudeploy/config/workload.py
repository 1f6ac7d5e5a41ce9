"""The [load] and [bench] tables: the load a deployment plans for, the sweep that measures it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from tpudeploy import facts
from tpudeploy.config import checks
from tpudeploy.config.base import Strict


class LoadConfig(Strict):
    """The load you expect; the planner warns when it does not fit the KV pool."""

    expected_clients: int | None = Field(default=None, gt=0, examples=[16])
    """the clients you plan for (checked against the KV pool)"""
    expected_context: int | None = Field(default=None, gt=0, examples=[1024])
    """their context length in tokens"""
    target_ttft_ms: int | None = Field(default=None, gt=0, examples=[250])
    """median time to first token to plan replicas for (ms); unset: the KV wall alone"""


PositiveInt = Annotated[int, Field(gt=0)]


class BenchTable(Strict):
    """`[bench]` and `[bench.quick]` keys; unset keys take the profile's own defaults (the full
    profile is the build log's 12-cell sweep, tpudeploy.bench)."""

    contexts: list[PositiveInt] | None = Field(
        default=None, min_length=1, examples=[list(facts.CONTEXTS)]
    )
    """context lengths of the sweep"""
    clients: list[PositiveInt] | None = Field(
        default=None, min_length=1, examples=[list(facts.CLIENTS)]
    )
    """concurrent clients of the sweep"""
    repetitions: PositiveInt | None = None
    """repetitions of every cell"""
    output_len: PositiveInt | None = None
    """output tokens per request"""
    prompts_per_client: PositiveInt | None = None
    """requests each client sends per cell"""
    min_prompts: PositiveInt | None = None
    """fewest requests per cell"""
    port: PositiveInt | None = None
    """the server's port inside the node"""
    model: str | None = Field(default=None, min_length=1)
    """model name sent by the benchmark client"""
    container: str | None = Field(default=None, min_length=1)
    """serving container the sweep runs in"""
    host: str | None = Field(default=None, min_length=1)
    """the server's address inside the node"""
    save_detailed: bool | None = None
    """save per-request details"""

    @field_validator("contexts", "clients")
    @classmethod
    def _distinct(cls, v: list[int] | None) -> list[int] | None:
        return checks.check_distinct(v)


class BenchConfig(BenchTable):
    """`make bench`: which profile runs, and the keys that change it."""

    profile: Literal["full", "quick"] = "full"
    """full (the build log's 12 cells x 3) or quick (4 cells x 1)"""
    quick: BenchTable = Field(default_factory=BenchTable)
    """[bench.quick]: the same keys, for the quick profile"""

    def table(self) -> dict[str, Any]:
        """The keys the user set, as the sweep reads them ([bench.quick] nested)."""
        data = self.model_dump(exclude_none=True, exclude={"quick", "profile"})
        quick = self.quick.model_dump(exclude_none=True)
        if quick:
            data["quick"] = quick
        if "profile" in self.model_fields_set:
            data["profile"] = self.profile
        return data


__all__ = ["BenchConfig", "BenchTable", "LoadConfig"]
