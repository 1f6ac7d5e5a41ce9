"""Nested provider blocks from plain dicts, checked against the bindings' own type hints.

The Kubernetes bindings model a pod spec as ~200 struct classes, and jsii refuses a dict where
the schema says a list of blocks (Terraform's `pre_stop` is a list of one). `typed(Cls, data)`
builds `Cls` from `data`, recursing into each field by its declared type: a struct field gets a
struct, a list-of-struct field a list of structs (a dict standing for a list of one), and an
unknown key raises TypeError naming it. What reaches jsii is the bindings' typed objects.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


@functools.cache
def _hints(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls.__init__)


def _struct_of(hint: Any) -> tuple[type | None, bool]:
    """(struct class, is a list) of a field's hint; (None, False) for scalars and maps."""
    args = typing.get_args(hint) if typing.get_origin(hint) is typing.Union else (hint,)
    for arg in args:
        origin = typing.get_origin(arg)
        if origin in (list, Sequence):
            (item,) = typing.get_args(arg)
            inner, _ = _struct_of(item)
            if inner is not None:
                return inner, True
        elif typing.get_origin(arg) is typing.Union:
            inner, many = _struct_of(arg)
            if inner is not None:
                return inner, many
        elif isinstance(arg, type) and arg.__module__.startswith("cdktf_cdktf_provider_"):
            return arg, False
    return None, False


def typed(cls: type[T], data: Mapping[str, Any] | T) -> T:
    """`cls(**data)` with every nested block built as its struct class."""
    if not isinstance(data, Mapping):
        return data
    hints = _hints(typing.cast(Any, cls))
    kwargs = {}
    for key, value in data.items():
        if key not in hints:
            raise TypeError(f"{cls.__name__} has no field {key!r}")
        struct, is_list = _struct_of(hints[key])
        if struct is not None and is_list:
            items = value if isinstance(value, list) else [value]
            kwargs[key] = [typed(struct, item) for item in items]
        elif struct is not None:
            kwargs[key] = typed(struct, value)
        else:
            kwargs[key] = value
    return cls(**kwargs)
