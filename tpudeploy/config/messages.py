"""Config problems in the words of the file the user wrote: TOML values, TOML kinds, one line each.

A problem names the key, the value, the reason and the fix. Values are shown as TOML (`true`,
`[]`, `{image = 4}`), never as Python (`True`, `()`, `{'image': 4}`), and a value of the wrong
kind is answered with the kind that belongs there and an example ("a list, like
["203.0.113.7/32"]").
"""

from __future__ import annotations

import datetime
import difflib
import json
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from tpudeploy.config.secretshape import redact


def toml_value(value: object, *, basic: bool = False) -> str:
    """`value` as it would be written in a TOML file. Strings use literal quotes ('...') by
    default, which TOML reads verbatim; basic=True gives basic strings ("..."), as examples are
    written."""
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        if not basic and "'" not in value and value.isprintable():
            return f"'{value}'"
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, Mapping):
        items = (f"{k} = {toml_value(v, basic=basic)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list | tuple | set | frozenset):
        return "[" + ", ".join(toml_value(v, basic=basic) for v in value) + "]"
    return str(value)


def problem(key: str, value: object, reason: str, fix: str) -> str:
    """One line: `key = value: reason. Fix: fix` (the value as TOML)."""
    return f"{key} = {toml_value(value)}: {reason}. Fix: {fix}"


# ---- kinds ------------------------------------------------------------------------------------


def kind_of(value: object) -> str:
    """What a TOML value is, in TOML's words."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int):
        return "a whole number"
    if isinstance(value, float):
        return "a number with a fraction"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return "a date or time"
    return type(value).__name__


def _members(annotation: object) -> list[object]:
    """The types a field accepts, without None (an unset optional)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return [a for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]


def expected_kind(annotation: object) -> str:
    """What belongs in a field, in TOML's words: "a list", "a string or a whole number"."""
    words = []
    for member in _members(annotation):
        origin = typing.get_origin(member) or member
        if typing.get_origin(member) is typing.Annotated:
            origin = typing.get_origin(typing.get_args(member)[0]) or typing.get_args(member)[0]
        if origin is typing.Literal:
            choices = ", ".join(toml_value(c, basic=True) for c in typing.get_args(member))
            word = f"one of {choices}"
        elif origin is bool:
            word = "true or false"
        elif origin is int:
            word = "a whole number"
        elif origin is float:
            word = "a number"
        elif origin is str:
            word = "a string"
        elif origin in (list, tuple, set, frozenset):
            word = "a list"
        elif origin in (dict, Mapping) or (
            isinstance(origin, type) and issubclass(origin, BaseModel)
        ):
            word = "a table"
        else:
            word = getattr(origin, "__name__", str(origin))
        if word not in words:
            words.append(word)
    return " or ".join(words)


def _accepts(annotation: object, value: object) -> bool:
    """Whether `value` is of a kind the field takes (its constraints aside)."""
    for member in _members(annotation):
        if typing.get_origin(member) is typing.Annotated:
            member = typing.get_args(member)[0]
        origin = typing.get_origin(member) or member
        if origin is typing.Literal:
            if isinstance(value, str):
                return True
            continue
        if origin is bool:
            if isinstance(value, bool):
                return True
        elif origin is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return True
        elif origin is float:
            if isinstance(value, int | float) and not isinstance(value, bool):
                return True
        elif origin is str:
            if isinstance(value, str):
                return True
        elif origin in (list, tuple, set, frozenset):
            if isinstance(value, list | tuple):
                return True
        elif origin in (dict, Mapping) or (
            isinstance(origin, type) and issubclass(origin, BaseModel)
        ):
            if isinstance(value, Mapping):
                return True
        else:
            return True  # a kind this module does not judge: leave it to the field's message
    return False


def example(field: FieldInfo) -> object | None:
    """What to write: the field's declared example, else its default when it shows the shape."""
    if field.examples:
        shown: object = field.examples[0]
        return shown
    default: object = field.get_default(call_default_factory=True)
    if default in (None, "", (), [], {}):
        return None
    return default


# ---- pydantic's errors, in the file's words ---------------------------------------------------

_PYDANTIC_CONSTRAINTS = {
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be {ge} or more",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be {le} or less",
    "too_short": "must hold at least {min_length} item(s)",
    "too_long": "must hold at most {max_length} item(s)",
}


def _walk(root: type[BaseModel], loc: tuple[int | str, ...]) -> tuple[str, FieldInfo | None, bool]:
    """The key a pydantic location names (`network.allowed_cidrs[1]`), its field, and whether
    the location points inside the field (an item of a list or table) rather than at it.

    pydantic appends the member it tried for a union (`max_run_duration.str`): those are dropped,
    so a union gives one problem, not one per member."""
    model: type[BaseModel] | None = root
    parts: list[str] = []
    field: FieldInfo | None = None
    inside = False
    i = 0
    while i < len(loc) and model is not None:
        name = str(loc[i])
        field = model.model_fields.get(name)
        parts.append(name)
        i += 1
        if field is None:
            break  # a part no model declares (pydantic names fields here): shown as it is
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
            continue
        model = None
        # Every field takes at least one kind besides None: _members is never empty.
        origin = typing.get_origin(_members(annotation)[0])
        if i < len(loc) and origin in (list, tuple, dict):
            # A table's item is named by its key (a TOML key is a string), a list's by index.
            part = loc[i]
            parts[-1] += f".{part}" if origin is dict else f"[{part}]"
            inside = True
    return ".".join(parts), field, inside


def format_errors(
    exc: ValidationError,
    root: type[BaseModel],
    *,
    hints: Mapping[str, str] | None = None,
) -> list[str]:
    """One problem per key (a union's members collapse into one), each with the fix."""
    hints = hints or {}
    problems: list[str] = []
    seen: set[str] = set()
    data_errors = exc.errors()
    for err in data_errors:
        loc = tuple(err["loc"])
        # Errors echo the input: a token pasted into the wrong key must not reach a log.
        value = redact(err.get("input"))
        if err["type"] == "extra_forbidden":
            key, parent, _ = _walk(root, loc[:-1])
            model = _model_of(parent) if parent else root
            known = list(model.model_fields)
            close = difflib.get_close_matches(str(loc[-1]), known, n=1)
            table = _table_holding(model, str(loc[-1]), prefix=key)
            if table:
                # A key written outside its table (`allowed_cidrs` at the top level).
                hint = f"did you mean `[{table}] {loc[-1]}`?"
            elif close:
                hint = f"did you mean {close[0]!r}?"
            else:
                hint = "known keys: " + ", ".join(known)
            name = f"{key}.{loc[-1]}" if key else str(loc[-1])
            problems.append(
                problem(name, value, "unknown key", f"remove it or fix the spelling; {hint}")
            )
            continue
        key, field, inside = _walk(root, loc)
        key = key or "(top level)"
        if key in seen:
            continue
        seen.add(key)
        if err["type"] == "missing":
            problems.append(problem(key, None, "required", hints.get(key, "add it to the file")))
            continue
        if err["type"] == "value_error":
            # Our own validators: the message already says what to write.
            reason, _, fix = str(err["msg"]).removeprefix("Value error, ").partition("; ")
            fix = fix or hints.get(key) or "see docs/configuration.md"
            problems.append(problem(key, value, reason, fix))
            continue
        problems.append(_kind_or_constraint(key, value, err, field, inside, hints))
    return problems


def _write(
    key: str,
    want: str,
    annotation: object,
    field: FieldInfo | None,
    inside: bool,
    value: object,
) -> str:
    """The fix for a value of the wrong kind: the kind that belongs, with an example."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"write [{key}] as a table: a line [{key}], then its keys one per line below it"
    shown = example(field) if field is not None else None
    if inside:
        # An item of a list or table: show an item of the example.
        if isinstance(shown, list | tuple) and shown:
            shown = shown[0]
        elif isinstance(shown, Mapping) and shown:
            shown = next(iter(shown.values()))
        else:
            shown = None
    text = f"write {want}"
    if shown is not None:
        text += f", like {toml_value(shown, basic=True)}"
    if isinstance(value, str) and want in ("a whole number", "a number", "true or false"):
        text += " (no quotes)"
    return text


def _table_holding(model: type[BaseModel], name: str, *, prefix: str = "") -> str:
    """The sub-table of `model` that has a key `name` (e.g. "network"), or ""."""
    for key, field in model.model_fields.items():
        annotation = field.annotation
        if (
            isinstance(annotation, type)
            and issubclass(annotation, BaseModel)
            and name in annotation.model_fields
        ):
            return f"{prefix}.{key}" if prefix else key
    return ""


def _model_of(field: FieldInfo) -> type[BaseModel]:
    annotation = field.annotation
    assert isinstance(annotation, type) and issubclass(annotation, BaseModel)
    return annotation


def _kind_or_constraint(
    key: str,
    value: object,
    err: Any,
    field: FieldInfo | None,
    inside: bool,
    hints: Mapping[str, str],
) -> str:
    annotation = field.annotation if field else None
    if inside and annotation is not None:
        # An item of a list or table: judge it against the item type.
        args = typing.get_args(_members(annotation)[0])
        annotation = args[-1] if args and args[-1] is not Ellipsis else (args[0] if args else None)
    if annotation is not None and not _accepts(annotation, value):
        want = expected_kind(annotation)
        return problem(
            key,
            value,
            f"{kind_of(value)} where {want} belongs",
            hints.get(key) or _write(key, want, annotation, field, inside, value),
        )
    template = _PYDANTIC_CONSTRAINTS.get(err["type"])
    ctx = err.get("ctx") or {}
    if template is not None:
        reason = template.format(**ctx)
    elif err["type"] == "literal_error" and annotation is not None:
        reason = f"must be {expected_kind(annotation)}"
    else:
        reason = str(err["msg"]).replace("Input should be", "must be")
    fix = hints.get(key)
    if fix is None and field is not None and not inside:
        shown = example(field)
        fix = f"for example {toml_value(shown, basic=True)}" if shown is not None else ""
    return problem(key, value, reason, fix or "see docs/configuration.md")
