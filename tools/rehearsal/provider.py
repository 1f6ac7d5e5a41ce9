"""Stand-ins for registry.terraform.io/hashicorp/google-beta 6.50.0 and hashicorp/kubernetes
2.38.0, run by Terraform itself (TPUDEPLOY_REHEARSAL_PROVIDER says which).

The `tf` package speaks Terraform's plugin protocol (the go-plugin handshake, mTLS, gRPC,
msgpack values); this module answers it with the real provider's schemas (generated from the
bindings, tools/rehearsal/schema.py) and the CRUD of tools/rehearsal/resources/ against the
loopback fakes: google-beta's per resource type, kubernetes's one generic object handler for
every type its schema holds (tools/rehearsal/resources/kubernetes.py). Terraform validates
every configuration against those schemas before the provider sees it, so an attribute the
real provider lacks is refused here too.

Terraform starts it from the provider mirror the rehearsal writes (tools/rehearsal/mirror.py);
`TPUDEPLOY_REHEARSAL_SCHEMA` names the generated schema file.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import msgpack
import tf.provider
from tf.gen import tfplugin_pb2 as pb
from tf.runner import run_provider
from tf.types import Unknown
from tf.utils import Diagnostics, read_dynamic_value, to_dynamic_value

from tools.rehearsal.bindings import BINDINGS, GOOGLE_BETA
from tools.rehearsal.mirror import PROVIDER_ENV
from tools.rehearsal.resources import (
    DATA_SOURCES,
    RESOURCES,
    ApiError,
    DataSource,
    ProviderConfig,
    Resource,
)

SCHEMA_ENV = "TPUDEPLOY_REHEARSAL_SCHEMA"
# Resource types in the schema that `terraform validate` may judge although the stand-in has no
# fake for them (comma-separated): validation is Terraform's check against the schema alone. A
# plan of one still fails, so nothing pretends to create what no fake serves.
VALIDATE_ONLY_ENV = "TPUDEPLOY_REHEARSAL_VALIDATE_ONLY"
Json = dict[str, Any]

_NESTING = {
    "single": pb.Schema.NestedBlock.NestingMode.SINGLE,
    "list": pb.Schema.NestedBlock.NestingMode.LIST,
    "set": pb.Schema.NestedBlock.NestingMode.SET,
    "map": pb.Schema.NestedBlock.NestingMode.MAP,
}
# Derived from other attributes: unknown in a plan whose labels change.
_LABEL_DERIVED = {
    "labels": ("effective_labels", "terraform_labels"),
    "annotations": ("effective_annotations",),
}


def is_unknown(value: Any) -> bool:
    """Terraform's unknown: msgpack extension 0, or 12 when it carries refinements (1.6+)."""
    return value is Unknown or (isinstance(value, msgpack.ExtType) and value.code in (0, 12))


def conform(block: Json, value: Any) -> Any:
    """`value` with exactly the block's attributes and nested blocks (msgpack objects must carry
    every attribute; absent list/set blocks are empty lists, absent single blocks null)."""
    if not isinstance(value, dict):
        return value
    out: Json = {name: value.get(name) for name in block["attributes"]}
    for name, nested in block.get("block_types", {}).items():
        item = value.get(name)
        if nested["nesting_mode"] == "single":
            out[name] = conform(nested["block"], item)
        elif isinstance(item, list):
            out[name] = [conform(nested["block"], element) for element in item]
        else:
            out[name] = [] if item is None else item
    return out


def known(value: Any) -> Any:
    """Unknowns left after apply become null (Terraform refuses unknowns in a new state)."""
    if is_unknown(value):
        return None
    if isinstance(value, dict):
        return {k: known(v) for k, v in value.items()}
    if isinstance(value, list):
        return [known(v) for v in value]
    return value


def _canonical(value: Any) -> str:
    return json.dumps(known(value), sort_keys=True, default=str)


def _decode(value: Any) -> Any:
    return read_dynamic_value(value) if value is not None else None


class StandInServicer(tf.provider.ProviderServicer):  # type: ignore[misc]
    """Every RPC a resource lifecycle needs, over the generated schemas.

    The tf package's servicer handles the plumbing; its plan and apply are replaced because it
    plans nested blocks without their schema and refuses the destroy plans Terraform sends.
    """

    schema: ClassVar[Json] = {}
    provider_name: ClassVar[str] = GOOGLE_BETA.name

    def __init__(self, app: Any) -> None:
        super().__init__(app)
        self.provider_config: Json = {}

    # ---- schemas

    def _block(self, type_name: str) -> Json:
        block: Json = self.schema["resource_schemas"][type_name]["block"]
        return block

    def _pb_schema(self, entry: Json) -> Any:
        return pb.Schema(version=entry.get("version", 0), block=_pb_block(entry["block"]))

    def _data_block(self, type_name: str) -> Json:
        block: Json = self.schema["data_source_schemas"][type_name]["block"]
        return block

    def _resource_class(self, type_name: str) -> type[Resource] | None:
        if self.provider_name == "kubernetes":
            from tools.rehearsal.resources.kubernetes import handler

            return handler(type_name, self.schema)
        return RESOURCES.get(type_name)

    def GetMetadata(self, request: Any, context: Any) -> Any:
        return pb.GetMetadata.Response(
            server_capabilities=pb.ServerCapabilities(plan_destroy=True),
            resources=[
                pb.GetMetadata.ResourceMetadata(type_name=t)
                for t in self.schema["resource_schemas"]
            ],
            data_sources=[
                pb.GetMetadata.DataSourceMetadata(type_name=t)
                for t in self.schema.get("data_source_schemas", {})
            ],
        )

    def GetProviderSchema(self, request: Any, context: Any) -> Any:
        return pb.GetProviderSchema.Response(
            provider=self._pb_schema(self.schema["provider"]),
            resource_schemas={
                name: self._pb_schema(entry)
                for name, entry in self.schema["resource_schemas"].items()
            },
            data_source_schemas={
                name: self._pb_schema(entry)
                for name, entry in self.schema.get("data_source_schemas", {}).items()
            },
            server_capabilities=pb.ServerCapabilities(plan_destroy=True),
        )

    def ValidateProviderConfig(self, request: Any, context: Any) -> Any:
        return pb.ValidateProviderConfig.Response()

    def ValidateResourceConfig(self, request: Any, context: Any) -> Any:
        diags = Diagnostics()
        if self._resource_class(request.type_name) is None and not _validate_only(
            request.type_name
        ):
            diags.add_error(
                f"the stand-in {self.provider_name} has no fake for {request.type_name}"
            )
        return pb.ValidateResourceConfig.Response(diagnostics=diags.to_pb())

    def ValidateDataResourceConfig(self, request: Any, context: Any) -> Any:
        diags = Diagnostics()
        if request.type_name not in DATA_SOURCES:
            diags.add_error(
                f"the stand-in {self.provider_name} has no fake for data source {request.type_name}"
            )
        return pb.ValidateDataResourceConfig.Response(diagnostics=diags.to_pb())

    def ReadDataSource(self, request: Any, context: Any) -> Any:
        """What the API reports for the data source's arguments: every computed value filled."""
        diags = Diagnostics()
        type_name = request.type_name
        block = self._data_block(type_name)
        config = conform(block, _decode(request.config))
        source: DataSource = DATA_SOURCES[type_name](ProviderConfig(self.provider_config))
        found = self._guard("reading", type_name, diags, lambda: source.read(known(config)))
        if diags.has_errors():
            return pb.ReadDataSource.Response(diagnostics=diags.to_pb())
        state = {
            name: value if value is not None and not is_unknown(value) else (found or {}).get(name)
            for name, value in config.items()
        }
        return pb.ReadDataSource.Response(
            state=to_dynamic_value(conform(block, state)), diagnostics=diags.to_pb()
        )

    def ConfigureProvider(self, request: Any, context: Any) -> Any:
        self.provider_config = dict(_decode(request.config) or {})
        return pb.ConfigureProvider.Response()

    def UpgradeResourceState(self, request: Any, context: Any) -> Any:
        state = json.loads(request.raw_state.json) if request.raw_state.json else None
        block = self._block(request.type_name)
        if isinstance(state, dict):
            for name, attr in block["attributes"].items():
                value = state.get(name)
                # State JSON keeps a dynamic value as {"value": ..., "type": ...}; msgpack wants
                # [the type as JSON, the value] (kubernetes_manifest's manifest and object).
                if attr["type"] == "dynamic" and isinstance(value, dict) and "type" in value:
                    state[name] = [json.dumps(value["type"]).encode(), value.get("value")]
        return pb.UpgradeResourceState.Response(
            upgraded_state=to_dynamic_value(conform(block, state))
        )

    # ---- lifecycle

    def _resource(self, type_name: str) -> Resource:
        cls = self._resource_class(type_name)
        assert cls is not None  # ValidateResourceConfig refused the type otherwise
        return cls(ProviderConfig(self.provider_config))

    def _guard(self, verb: str, type_name: str, diags: Diagnostics, call: Callable[[], Any]) -> Any:
        """Run one CRUD call; an API refusal or a stand-in bug becomes an error diagnostic."""
        try:
            return call()
        except ApiError as exc:
            diags.add_error(f"Error {verb} {type_name}: {exc}")
        except Exception as exc:  # a bug here must read as one, never as a silent success
            traceback.print_exc(file=sys.stderr)
            diags.add_error(f"stand-in {self.provider_name} failed {verb} {type_name}: {exc!r}")
        return None

    def ReadResource(self, request: Any, context: Any) -> Any:
        diags = Diagnostics()
        type_name = request.type_name
        block = self._block(type_name)
        current = conform(block, _decode(request.current_state))
        found = self._guard(
            "reading", type_name, diags, lambda: self._resource(type_name).read(current)
        )
        if diags.has_errors():
            return pb.ReadResource.Response(diagnostics=diags.to_pb())
        new_state = None
        if found is not None:
            new_state = dict(current)
            # Refresh what the API decides: computed attributes, and optional+computed ones
            # the configuration left to it. What the configuration sets stays as planned.
            for name, attr in block["attributes"].items():
                if name not in found or not attr.get("computed"):
                    continue
                if not attr.get("optional") or new_state.get(name) is None:
                    new_state[name] = found[name]
        return pb.ReadResource.Response(
            new_state=to_dynamic_value(conform(block, new_state)),
            private=request.private,
            diagnostics=diags.to_pb(),
        )

    def PlanResourceChange(self, request: Any, context: Any) -> Any:
        type_name = request.type_name
        if self._resource_class(type_name) is None:
            diags = Diagnostics()
            diags.add_error(
                f"the stand-in {self.provider_name} has no fake for {type_name}: it can be "
                "validated, not planned"
            )
            return pb.PlanResourceChange.Response(diagnostics=diags.to_pb())
        block = self._block(type_name)
        prior = _decode(request.prior_state)
        proposed = _decode(request.proposed_new_state)
        if proposed is None:  # destroy
            return pb.PlanResourceChange.Response(planned_state=to_dynamic_value(None))
        planned = conform(block, proposed)
        requires_replace: list[Any] = []
        attributes = block["attributes"]
        if prior is None:
            for name, attr in attributes.items():
                if attr.get("computed") and planned.get(name) is None:
                    planned[name] = Unknown
        else:
            prior = conform(block, prior)
            changed = [
                name
                for name in [*attributes, *block.get("block_types", {})]
                if name != "timeouts"
                and not (
                    attributes.get(name, {}).get("computed") and not _configurable(attributes, name)
                )
                and (
                    is_unknown(planned.get(name))
                    or _canonical(prior.get(name)) != _canonical(planned.get(name))
                )
            ]
            cls = self._resource_class(type_name)
            updatable = cls.updatable if cls is not None else frozenset()
            requires_replace = [
                pb.AttributePath(steps=[pb.AttributePath.Step(attribute_name=name)])
                for name in changed
                if name not in updatable
            ]
            for name in changed:
                for derived in _LABEL_DERIVED.get(name, ()):
                    if derived in planned:
                        planned[derived] = Unknown
        return pb.PlanResourceChange.Response(
            planned_state=to_dynamic_value(planned),
            requires_replace=requires_replace,
            planned_private=request.prior_private,
        )

    def ApplyResourceChange(self, request: Any, context: Any) -> Any:
        diags = Diagnostics()
        type_name = request.type_name
        block = self._block(type_name)
        prior = conform(block, _decode(request.prior_state))
        planned = conform(block, _decode(request.planned_state))
        resource = self._resource(type_name)
        new_state: Json | None = None
        if planned is None:
            self._guard("deleting", type_name, diags, lambda: resource.delete(prior))
        else:
            # The handlers see nulls where the plan left values for them to find out.
            target = known(planned)
            if prior is None:
                values = self._guard("creating", type_name, diags, lambda: resource.create(target))
            else:
                values = self._guard(
                    "updating", type_name, diags, lambda: resource.update(prior, target)
                )
            if diags.has_errors():
                return pb.ApplyResourceChange.Response(diagnostics=diags.to_pb())
            new_state = {
                name: (values or {}).get(name) if is_unknown(value) else value
                for name, value in planned.items()
            }
            new_state = known(new_state)
        return pb.ApplyResourceChange.Response(
            new_state=to_dynamic_value(conform(block, new_state)),
            private=request.planned_private,
            diagnostics=diags.to_pb(),
        )


def _configurable(attributes: Json, name: str) -> bool:
    attr = attributes.get(name, {})
    return bool(attr.get("optional") or attr.get("required"))


def _pb_block(block: Json) -> Any:
    attributes = [
        pb.Schema.Attribute(
            name=name,
            type=json.dumps(attr["type"]).encode(),
            required=bool(attr.get("required")),
            optional=bool(attr.get("optional")),
            computed=bool(attr.get("computed")),
            sensitive=bool(attr.get("sensitive")),
        )
        for name, attr in sorted(block["attributes"].items())
    ]
    nested = [
        pb.Schema.NestedBlock(
            type_name=name,
            block=_pb_block(entry["block"]),
            nesting=_NESTING[entry["nesting_mode"]],
            min_items=entry.get("min_items", 0),
            max_items=entry.get("max_items", 0),
        )
        for name, entry in sorted(block.get("block_types", {}).items())
    ]
    return pb.Schema.Block(attributes=attributes, block_types=nested)


class StandInProvider:
    """What tf's runner asks of a provider object; the servicer above does the rest."""

    def full_name(self) -> str:
        return BINDINGS[StandInServicer.provider_name].source

    def get_model_prefix(self) -> str:
        return ""


def _validate_only(type_name: str) -> bool:
    return type_name in os.environ.get(VALIDATE_ONLY_ENV, "").split(",")


def main() -> None:
    path = os.environ.get(SCHEMA_ENV, "")
    if not path or not Path(path).is_file():
        print(
            f"stand-in provider: {SCHEMA_ENV} must name the generated schema file "
            "(make rehearse writes it)",
            file=sys.stderr,
        )
        sys.exit(1)
    StandInServicer.schema = json.loads(Path(path).read_text())
    StandInServicer.provider_name = os.environ.get(PROVIDER_ENV) or GOOGLE_BETA.name
    # tf's runner builds `tf.provider.ProviderServicer(provider)` when it starts serving; this
    # subclass is that servicer for this process.
    tf.provider.ProviderServicer = StandInServicer
    run_provider(StandInProvider(), sys.argv)


if __name__ == "__main__":
    main()
