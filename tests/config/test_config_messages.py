"""Config problems in the words of the file: values as TOML, kinds as TOML names them
(tpudeploy/config/messages.py), for the deployment config and any other model it words."""

from __future__ import annotations

import datetime
import ipaddress
import typing
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field, ValidationError, field_validator

from tpudeploy.config import ConfigError, parse_config
from tpudeploy.config.base import Strict
from tpudeploy.config.messages import (
    _accepts,
    example,
    expected_kind,
    format_errors,
    kind_of,
    toml_value,
)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "(unset)"),
        (True, "true"),
        (False, "false"),
        ("gemma", "'gemma'"),
        ("it's", '"it\'s"'),  # a literal string cannot hold a single quote
        ("a\tb", '"a\\tb"'),  # nor a control character
        ("gemma-ü", "'gemma-ü'"),
        (8000, "8000"),
        (0.92, "0.92"),
        (float("inf"), "inf"),
        (datetime.date(2026, 9, 1), "2026-09-01"),
        (datetime.time(4, 30), "04:30:00"),
        ({"image": 4, "name": "x"}, "{image = 4, name = 'x'}"),
        (["a", 1, True], "['a', 1, true]"),
        (("a",), "['a']"),
        (ipaddress.ip_network("10.0.0.0/8"), "10.0.0.0/8"),
    ],
)
def test_values_read_as_toml(value: object, shown: str) -> None:
    assert toml_value(value) == shown


def test_examples_use_basic_strings_all_the_way_down() -> None:
    assert toml_value("gemma-ü", basic=True) == '"gemma-ü"'
    assert toml_value({"a": ["x", {"b": "y"}]}, basic=True) == '{a = ["x", {b = "y"}]}'


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (True, "true/false"),
        (3, "a whole number"),
        (0.5, "a number with a fraction"),
        ("x", "a string"),
        ({}, "a table"),
        ([], "a list"),
        ((), "a list"),
        (datetime.date(2026, 9, 1), "a date or time"),
        (datetime.time(4, 30), "a date or time"),
        (None, "NoneType"),
        (ipaddress.ip_network("10.0.0.0/8"), "IPv4Network"),  # not TOML: its type's name
    ],
)
def test_kinds_read_as_toml_names_them(value: object, kind: str) -> None:
    assert kind_of(value) == kind


class Table(BaseModel):
    size: int = 1


@pytest.mark.parametrize(
    ("annotation", "kind"),
    [
        (int, "a whole number"),
        (float, "a number"),
        (bool, "true or false"),
        (str, "a string"),
        (list[str], "a list"),
        (tuple[str, ...], "a list"),
        (dict[str, int], "a table"),
        (Table, "a table"),
        (Literal["a", "b"], 'one of "a", "b"'),
        (str | int, "a string or a whole number"),
        (typing.Union[int, str], "a whole number or a string"),  # noqa: UP007 - the old spelling
        (int | None, "a whole number"),
        (Annotated[int, Field(gt=0)], "a whole number"),
        (Annotated[int, Field(gt=0)] | None, "a whole number"),
        (list[int] | tuple[int, ...], "a list"),  # one word per kind
        (datetime.date, "date"),  # a kind messages does not name: its own name
        (typing.ForwardRef("Later"), "ForwardRef('Later')"),  # or what it reads as, unnamed
        (Annotated[list[int], Field(min_length=1)], "a list"),
    ],
)
def test_what_belongs_in_a_field(annotation: object, kind: str) -> None:
    assert expected_kind(annotation) == kind


@pytest.mark.parametrize(
    ("annotation", "value", "accepted"),
    [
        (int, 3, True),
        (int, True, False),  # TOML's true is not a number
        (int, "3", False),
        (float, 3, True),
        (float, 0.5, True),
        (float, True, False),
        (bool, True, True),
        (bool, 1, False),
        (str, "x", True),
        (str, 1, False),
        (list[str], ("a",), True),
        (list[str], "a", False),
        (dict[str, int], {}, True),
        (dict[str, int], [], False),
        (Table, {"size": 2}, True),
        (Literal["none"], "anything", True),  # a string: the choice is judged by its own check
        (Literal["none"] | int, 5, True),
        (Literal["none"], 5, False),
        (Annotated[int, Field(gt=0)], 0, True),  # the kind is right; the constraint is not
        (datetime.date, 5, True),  # kinds messages does not judge are left to pydantic's message
        (Any, 5, True),
    ],
)
def test_which_values_are_of_the_right_kind(
    annotation: object, value: object, accepted: bool
) -> None:
    assert _accepts(annotation, value) is accepted


class Shapes(Strict):
    port: int = 8000
    empty: str = ""
    items: list[str] = Field(default_factory=list)
    named: dict[str, int] = Field(default_factory=dict)
    shown: int = Field(default=5, examples=[7])


@pytest.mark.parametrize(
    ("name", "shown"),
    [("port", 8000), ("empty", None), ("items", None), ("named", None), ("shown", 7)],
)
def test_what_to_write_is_the_example_or_a_default_that_shows_the_shape(
    name: str, shown: object
) -> None:
    assert example(Shapes.model_fields[name]) == shown


class Required(Strict):
    name: str
    zone: str
    ratio: float = Field(default=0.5, allow_inf_nan=False)
    choice: str | int = "x"
    tags: list[str] = Field(default_factory=lambda: ["a"])
    counts: dict[str, int] = Field(default_factory=dict)
    limit: int | None = Field(default=None, gt=0)
    label: str = Field(default="gemma", min_length=3)
    note: str = "n"

    @field_validator("note")
    @classmethod
    def _note(cls, v: str) -> str:
        raise ValueError("notes are read-only")  # a reason with no fix of its own


def problems(data: dict[str, Any], hints: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ValidationError) as info:
        Required.model_validate(data)
    return format_errors(info.value, Required, hints=hints)


def test_each_missing_key_is_named_once_with_what_to_do() -> None:
    assert problems({}, hints={"zone": 'write zone = "us-west4-a"'}) == [
        "name = (unset): required. Fix: add it to the file",
        'zone = (unset): required. Fix: write zone = "us-west4-a"',
    ]


def test_a_union_is_answered_once_and_every_key_after_it_too() -> None:
    found = problems({"name": "n", "zone": "z", "ratio": "0.5", "choice": 1.5, "tags": "a"})
    assert found == [
        "ratio = '0.5': a string where a number belongs. Fix: write a number, like 0.5 (no quotes)",
        "choice = 1.5: a number with a fraction where a string or a whole number belongs. Fix: "
        'write a string or a whole number, like "x"',
        "tags = 'a': a string where a list belongs. Fix: write a list, like [\"a\"]",
    ]


def test_constraints_in_the_files_words() -> None:
    assert problems({"name": "n", "zone": "z", "ratio": float("inf")}) == [
        "ratio = inf: must be a finite number. Fix: for example 0.5"
    ]
    # pydantic's own sentence when it has one; the example as a basic string, as written.
    assert problems({"name": "n", "zone": "z", "label": "ab"}) == [
        "label = 'ab': String should have at least 3 characters. Fix: for example \"gemma\""
    ]
    # No example and no default that shows one: the reference says what to write.
    assert problems({"name": "n", "zone": "z", "limit": 0}) == [
        "limit = 0: must be greater than 0. Fix: see docs/configuration.md"
    ]


def test_an_item_of_a_table_without_an_example() -> None:
    assert problems({"name": "n", "zone": "z", "counts": {"a": "1"}}) == [
        "counts.a = '1': a string where a whole number belongs. Fix: write a whole number "
        "(no quotes)"
    ]


def test_an_item_of_a_top_level_list_is_named_by_its_index() -> None:
    assert problems({"name": "n", "zone": "z", "tags": ["a", 5]}) == [
        'tags[1] = 5: a whole number where a string belongs. Fix: write a string, like "a"'
    ]


def test_a_check_without_a_fix_gets_the_hint_or_the_reference() -> None:
    data = {"name": "n", "zone": "z", "note": "x"}
    assert problems(data) == ["note = 'x': notes are read-only. Fix: see docs/configuration.md"]
    assert problems(data, hints={"note": "remove it"}) == [
        "note = 'x': notes are read-only. Fix: remove it"
    ]


# ---- the deployment config's own fields ----------------------------------------------------------


def config_problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return info.value.problems


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            {"vllm": {"max_model_len": 0}},
            "vllm.max_model_len = 0: must be greater than 0. Fix: for example 32768",
            id="greater-than",
        ),
        pytest.param(
            {"vllm": {"port": 80}},
            "vllm.port = 80: must be 1024 or more. Fix: for example 8000",
            id="at-least",
        ),
        pytest.param(
            {"vllm": {"port": 70000}},
            "vllm.port = 70000: must be 65535 or less. Fix: for example 8000",
            id="at-most",
        ),
        pytest.param(
            {"bench": {"contexts": []}},
            "bench.contexts = []: must hold at least 1 item(s). Fix: for example [128, 1024, 8192]",
            id="too-short",
        ),
        pytest.param(
            {"vllm": {"gpu_memory_utilization": float("inf")}},
            "vllm.gpu_memory_utilization = inf: must be 1.0 or less. Fix: a fraction in "
            "(0, 1]; the build log's ceiling on v5e is 0.92",
            id="hinted",
        ),
        pytest.param(
            {"bench": {"model": ""}},
            "bench.model = '': String should have at least 1 character. Fix: see "
            "docs/configuration.md",
            id="pydantic-own-sentence",
        ),
        pytest.param(
            {"provisioning": "preemptible"},
            'provisioning = \'preemptible\': must be one of "flex-start", "spot", "on-demand". '
            'Fix: use "flex-start" (stops billing on its own), "spot" or "on-demand"',
            id="choice",
        ),
        pytest.param(
            {"provisioning": 5},
            'provisioning = 5: a whole number where one of "flex-start", "spot", "on-demand" '
            'belongs. Fix: use "flex-start" (stops billing on its own), "spot" or "on-demand"',
            id="choice-of-the-wrong-kind",
        ),
        pytest.param(
            {"project": 5},
            "project = 5: a whole number where a string belongs. Fix: write a string",
            id="empty-default-shows-nothing",
        ),
        pytest.param(
            {"bench": {"repetitions": "3"}},
            "bench.repetitions = '3': a string where a whole number belongs. Fix: write a "
            "whole number (no quotes)",
            id="annotated-optional",
        ),
        pytest.param(
            {"vllm": {"limit_mm_per_prompt": {"image": "4"}}},
            "vllm.limit_mm_per_prompt.image = '4': a string where a whole number belongs. "
            "Fix: write a whole number, like 4 (no quotes)",
            id="item-of-a-table",
        ),
        pytest.param(
            {"labels": {"team": 5}},
            "labels.team = 5: a whole number where a string belongs. Fix: write a string, "
            'like "ml"',
            id="item-of-a-table-of-strings",
        ),
        pytest.param(
            {"bench": {"contexts": [1024, "2048"]}},
            "bench.contexts[1] = '2048': a string where a whole number belongs. Fix: write a "
            "whole number, like 128 (no quotes)",
            id="item-of-a-list-of-annotated",
        ),
        pytest.param(
            {"bench": {"quick": 5}},
            "bench.quick = 5: a whole number where a table belongs. Fix: write [bench.quick] as "
            "a table: a line [bench.quick], then its keys one per line below it",
            id="table",
        ),
    ],
)
def test_config_problems_in_toml_words(data: dict[str, Any], expected: str) -> None:
    assert config_problems(data) == [expected]


class _Inner(Strict):
    port: int = 1


class _Middle(Strict):
    inner: _Inner = Field(default_factory=_Inner)
    size: int = 1


class _Outer(Strict):
    middle: _Middle = Field(default_factory=_Middle)
    name: str = "n"


def _unknown(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as info:
        _Outer.model_validate(data)
    return format_errors(info.value, _Outer)


def test_a_key_outside_its_table_is_pointed_at_the_table_that_holds_it() -> None:
    """Issue 23 item 10: a top-level `allowed_cidrs` gets "did you mean `[network] ...`", and
    the same holds a table down, where the table is named by its whole dotted path."""
    fix = "Fix: remove it or fix the spelling; did you mean"
    assert _unknown({"size": 2}) == [f"size = 2: unknown key. {fix} `[middle] size`?"]
    assert _unknown({"middle": {"port": 2}}) == [
        f"middle.port = 2: unknown key. {fix} `[middle.inner] port`?"
    ]
    # A key no table holds gets the closest spelling instead.
    assert _unknown({"nmae": "x"}) == [f"nmae = 'x': unknown key. {fix} 'name'?"]
    (found,) = _problems_of({"allowed_cidrs": ["203.0.113.0/24"]})
    assert found.endswith("did you mean `[network] allowed_cidrs`?")


def _problems_of(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return info.value.problems
