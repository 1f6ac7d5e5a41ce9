"""Provider schemas (google-beta 6.50.0, kubernetes 2.38.0), generated from the installed
bindings' jsii assemblies.

The stand-in providers must refuse what the real ones refuse, so their schemas are not written by
hand: they come from `cdktf-cdktf-provider-google-beta` 16.12.1 and
`cdktf-cdktf-provider-kubernetes` 12.1.1, whose jsii assemblies were generated from google-beta
6.50.0's and kubernetes 2.38.0's own schemas (each class's docs link names the version). One
generator reads both, parameterised by a `Binding`. Three parts of each tarball are read:

- `.jsii`: every resource class (its Terraform type in the docs link), and the type of each of
  its properties (string, number, bool, list/map, nested list of objects);
- the TypeScript source embedded in each module's source map: the generator's
  `// <name> - computed: X, optional: Y, required: Z` line above every property, which names the
  Terraform attribute and says whether it is computed, optional or required, and
  `new XList(this, "<name>", <wrapsSet>)`, which says list or set;
- the same source's `*ToHclTerraform` tables (`isBlock`, `type: "struct"` for a single block).

The output has the layout of `terraform providers schema -json` (resource and data source
schemas) and is cached under build/rehearsal/, keyed by the tarball's hash: reading the 110 MB
assembly takes seconds.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import re
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.rehearsal.bindings import GOOGLE_BETA, Binding

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
CACHE_DIR = REPO_ROOT / "build" / "rehearsal"

Json = dict[str, Any]


# The names the google-beta stand-in was built with (tools/rehearsal/mirror.py, tests).
ASSEMBLY = GOOGLE_BETA.assembly
PROVIDER_SOURCE = GOOGLE_BETA.source
PROVIDER_VERSION = GOOGLE_BETA.version

_FLAGS = re.compile(
    r"^  // (?P<snake>\w+) - computed: (?P<computed>true|false),"
    r" optional: (?P<optional>true|false), required: (?P<required>true|false)\n"
    r"(?P<between>(?:  (?!public get ).*\n)*?)"
    r"  public get (?P<camel>\w+)\(\)[^{\n]*\{\n\s*return (?P<expr>.*);",
    re.M,
)
_FIELD = re.compile(r'new (?P<cls>[\w.]+)\(this, "(?P<snake>\w+)"(?:, (?P<set>true|false))?\)')
_CLASS = re.compile(
    r"^export class (?P<name>\w+) extends [\w.]+ \{\n(?P<body>.*?)^\}\n", re.M | re.S
)
_HCL_FUNCTION = re.compile(
    r"^export function \w+ToHclTerraform\(struct\?: (?P<struct>\w+)[^)]*\): any \{\n"
    r"(?P<body>.*?)^\}\n",
    re.M | re.S,
)
_HCL_ENTRY = re.compile(
    r"^\s+(?P<snake>\w+): \{\n\s+value: .*\n\s+isBlock: (?P<block>true|false),\n"
    r'\s+type: "(?P<type>\w+)",\n\s+storageClassType: "(?P<storage>\w+)",',
    re.M,
)

_PRIMITIVES = {"string": "string", "number": "number", "boolean": "bool", "any": "dynamic"}
_MAPS = {
    "cdktf.StringMap": ["map", "string"],
    "cdktf.NumberMap": ["map", "number"],
    "cdktf.BooleanMap": ["map", "bool"],
    "cdktf.AnyMap": ["map", "dynamic"],
    "cdktf.StringMapList": ["list", ["map", "string"]],
    "cdktf.NumberMapList": ["list", ["map", "number"]],
    "cdktf.BooleanMapList": ["list", ["map", "bool"]],
}
_STORAGE = {
    "string": "string",
    "number": "number",
    "boolean": "bool",
    "stringList": ["list", "string"],
    "numberList": ["list", "number"],
    "booleanList": ["list", "bool"],
    "stringMap": ["map", "string"],
    "numberMap": ["map", "number"],
    "booleanMap": ["map", "bool"],
}


class SchemaError(Exception):
    """The assembly does not hold what the generator expects; the message names the spot."""


def assembly_tarball(binding: Binding = GOOGLE_BETA) -> Path:
    """The installed bindings' jsii tarball (the file jsii loads at every synth)."""
    spec = importlib.util.find_spec(binding.package)
    distribution = binding.package.replace("_", "-")
    if spec is None or not spec.submodule_search_locations:
        raise SchemaError(f"{distribution} is not installed: run `make install`, then rehearse")
    folder = Path(next(iter(spec.submodule_search_locations))) / "_jsii"
    stem = binding.assembly.removeprefix("@cdktf/")
    found = sorted(folder.glob(f"{stem}@*.jsii.tgz"))
    if len(found) != 1:
        raise SchemaError(f"expected one {stem} jsii tarball in {folder}, found {found}")
    return found[0]


@dataclass
class _Module:
    """One TypeScript module of the bindings: its classes and its HCL tables."""

    classes: dict[str, str]
    hcl: dict[str, dict[str, tuple[bool, str, str]]]


@dataclass
class _Assembly:
    """The `.jsii` document and the JavaScript files of the modules asked for."""

    jsii: Json
    files: dict[str, str]
    modules: dict[str, _Module] = field(default_factory=dict)

    def module(self, filename: str) -> _Module:
        """`src/google-tpu-v2-vm/index.ts` -> its classes and HCL tables, parsed once."""
        if filename not in self.modules:
            js = self.files.get(filename)
            if js is None:
                raise SchemaError(f"{filename} was not read from the assembly")
            match = re.search(r"sourceMappingURL=data:application/json;base64,(\S+)", js)
            if not match:
                raise SchemaError(f"{filename}: the compiled module has no inline source map")
            source = json.loads(base64.b64decode(match.group(1)))["sourcesContent"][0]
            classes = {m["name"]: m["body"] for m in _CLASS.finditer(source)}
            hcl: dict[str, dict[str, tuple[bool, str, str]]] = {}
            for m in _HCL_FUNCTION.finditer(source):
                hcl[m["struct"]] = _hcl_entries(m["body"])
            for name, body in classes.items():
                at = body.find("synthesizeHclAttributes()")
                if at >= 0:
                    hcl[name] = _hcl_entries(body[at:])
            self.modules[filename] = _Module(classes, hcl)
        return self.modules[filename]


def _read(tarball: Path, folders: set[str], binding: Binding) -> _Assembly:
    """One pass over the tarball (a gzip stream: random access would inflate it again for every
    file): the `.jsii` document and every compiled file under lib/<folder>/, keyed by the
    TypeScript path the jsii types point at (src/<folder>/....ts)."""
    jsii: Json | None = None
    files: dict[str, str] = {}
    with tarfile.open(tarball, "r|gz") as tar:
        for member in tar:
            name = member.name
            if name == "package/.jsii":
                handle = tar.extractfile(member)
                jsii = json.load(handle) if handle else None
            elif name.startswith("package/lib/") and name.endswith(".js"):
                rel = name.removeprefix("package/lib/")
                if "*" in folders or rel.split("/", 1)[0] in folders:
                    handle = tar.extractfile(member)
                    if handle:
                        files["src/" + rel.removesuffix(".js") + ".ts"] = handle.read().decode()
    if jsii is None:
        raise SchemaError(f"{tarball} holds no package/.jsii")
    if jsii.get("name") != binding.assembly:
        raise SchemaError(f"{tarball} is {jsii.get('name')}, not {binding.assembly}")
    return _Assembly(jsii, files)


def _hcl_entries(text: str) -> dict[str, tuple[bool, str, str]]:
    return {
        m["snake"]: (m["block"] == "true", m["type"], m["storage"])
        for m in _HCL_ENTRY.finditer(text)
    }


def _fqn_parts(fqn: str) -> tuple[str, str]:
    """`@cdktf/provider-google-beta.googleTpuV2Vm.GoogleTpuV2VmNetworkConfigList` -> namespace,
    class name."""
    rest = fqn.split(".", 1)[1]
    namespace, _, name = rest.rpartition(".")
    return namespace, name


class _Generator:
    def __init__(self, assembly: _Assembly, binding: Binding) -> None:
        self.a = assembly
        self.prefix = binding.assembly + "."
        self.types: Json = assembly.jsii["types"]

    def _class(self, fqn: str) -> Json:
        found: Json | None = self.types.get(fqn)
        if found is None:
            raise SchemaError(f"{fqn} is not in the jsii assembly")
        return found

    def _property_types(self, fqn: str) -> dict[str, Json]:
        return {p["name"]: p["type"] for p in self._class(fqn).get("properties", [])}

    def block(self, fqn: str, where: str) -> Json:
        """The Terraform block of a resource class or an OutputReference class."""
        cls = self._class(fqn)
        module = self.a.module(cls["locationInModule"]["filename"])
        _, name = _fqn_parts(fqn)
        body = module.classes.get(name)
        if body is None:
            raise SchemaError(f"{where}: class {name} not found in its TypeScript source")
        struct = name.removesuffix("OutputReference")
        hcl = module.hcl.get(struct, {})
        types = self._property_types(fqn)
        attributes: Json = {}
        blocks: Json = {}
        for m in _FLAGS.finditer(body):
            snake, camel = m["snake"], m["camel"]
            here = f"{where}.{snake}"
            computed, optional, required = (
                m[k] == "true" for k in ("computed", "optional", "required")
            )
            if camel not in types:
                raise SchemaError(f"{here}: getter {camel} missing from the jsii class {name}")
            jtype = types[camel]
            init = _FIELD.search(m["between"])
            nested = self._nested(jtype, init, here)
            is_block, hcl_type, storage = hcl.get(snake, (False, "", ""))
            if nested is None:
                ctype = self._value_type(jtype, m["expr"], hcl_type, storage, here)
                attributes[snake] = _flags({"type": ctype}, computed, optional, required)
                continue
            mode, element_fqn = nested
            inner = self.block(element_fqn, here)
            if computed and not optional and not required:
                # A computed-only nested value is an attribute of object type, not a block.
                obj = ["object", _object_type(inner)]
                ctype = obj if mode == "single" else [mode if mode == "set" else "list", obj]
                attributes[snake] = _flags({"type": ctype}, computed, optional, required)
                continue
            if hcl and not is_block:
                raise SchemaError(f"{here}: nested type but not a block in the HCL table")
            entry: Json = {"nesting_mode": mode, "block": inner}
            if mode == "single" and hcl_type != "struct":
                entry["nesting_mode"] = "list"
                entry["max_items"] = 1
            if required:
                entry["min_items"] = 1
            blocks[snake] = entry
        if not attributes and not blocks and hcl:
            raise SchemaError(f"{where}: no attribute comments parsed from class {name}")
        block: Json = {"attributes": attributes}
        if blocks:
            block["block_types"] = blocks
        return block

    def _nested(
        self, jtype: Json, init: re.Match[str] | None, where: str
    ) -> tuple[str, str] | None:
        """(nesting mode, element OutputReference fqn) for a List / OutputReference getter."""
        fqn = jtype.get("fqn", "")
        if not fqn.startswith(self.prefix):
            return None
        namespace, name = _fqn_parts(fqn)
        if name.endswith("OutputReference"):
            return "single", fqn
        if name.endswith("List"):
            element = f"{self.prefix}{namespace}.{name.removesuffix('List')}OutputReference"
            if init is None or init["set"] is None:
                raise SchemaError(f"{where}: no `new {name}(this, ..., wrapsSet)` initializer")
            return ("set" if init["set"] == "true" else "list"), element
        raise SchemaError(f"{where}: unsupported nested jsii type {fqn}")

    @staticmethod
    def _value_type(jtype: Json, expr: str, hcl_type: str, storage: str, where: str) -> Any:
        if "primitive" in jtype:
            return _PRIMITIVES[jtype["primitive"]]
        if "union" in jtype:
            kinds = {t.get("primitive") for t in jtype["union"]["types"]}
            if "boolean" in kinds:
                return "bool"
            raise SchemaError(f"{where}: unsupported union type {jtype}")
        if "collection" in jtype:
            coll = jtype["collection"]
            element = coll["elementtype"]
            if "primitive" not in element:
                raise SchemaError(f"{where}: unsupported collection element {element}")
            etype = _PRIMITIVES[element["primitive"]]
            if coll["kind"] == "map":
                # cdktf renders a `dynamic` attribute (kubernetes_manifest's manifest and object)
                # as a map of any; no provider declares a map whose elements may differ in type.
                return "dynamic" if etype == "dynamic" else ["map", etype]
            is_set = hcl_type == "set" or "Fn.tolist(" in expr
            return ["set" if is_set else "list", etype]
        fqn = jtype.get("fqn", "")
        if fqn in _MAPS:
            return _MAPS[fqn]
        if fqn == "cdktf.IResolvable" and "getBooleanAttribute(" in expr:
            return "bool"  # a computed boolean's getter returns an IResolvable
        if storage in _STORAGE:
            return _STORAGE[storage]
        raise SchemaError(f"{where}: unsupported jsii type {jtype}")

    def provider(self, fqn: str) -> Json:
        """The provider block: attributes from the flag comments, blocks from the HCL tables
        (provider blocks are plain structs, not OutputReference classes)."""
        cls = self._class(fqn)
        module = self.a.module(cls["locationInModule"]["filename"])
        _, name = _fqn_parts(fqn)
        body = module.classes[name]
        hcl = module.hcl.get(name, {})
        types = self._property_types(fqn)
        attributes: Json = {}
        blocks: Json = {}
        for m in _FLAGS.finditer(body):
            snake = m["snake"]
            if snake == "alias":
                continue  # cdktf's meta-argument, not an attribute of the provider
            is_block, hcl_type, storage = hcl.get(snake, (False, "", ""))
            if is_block:
                struct = storage.removesuffix("List")
                inner = {
                    "attributes": {
                        k: {"type": _STORAGE[s], "optional": True}
                        for k, (_, _, s) in module.hcl.get(struct, {}).items()
                    }
                }
                blocks[snake] = {"nesting_mode": "list", "block": inner, "max_items": 1}
                continue
            ctype = self._value_type(types[m["camel"]], m["expr"], hcl_type, storage, snake)
            attributes[snake] = _flags(
                {"type": ctype},
                m["computed"] == "true",
                m["optional"] == "true",
                m["required"] == "true",
            )
        return {"attributes": attributes, "block_types": blocks}


def _flags(entry: Json, computed: bool, optional: bool, required: bool) -> Json:
    if required:
        entry["required"] = True
    if optional:
        entry["optional"] = True
    if computed:
        entry["computed"] = True
    return entry


def _object_type(block: Json) -> Json:
    """A block's attributes and nested blocks as one cty object type."""
    obj: Json = {name: attr["type"] for name, attr in block["attributes"].items()}
    for name, nested in block.get("block_types", {}).items():
        inner = ["object", _object_type(nested["block"])]
        obj[name] = inner if nested["nesting_mode"] == "single" else [nested["nesting_mode"], inner]
    return obj


_BASES = {"resources": "cdktf.TerraformResource", "data-sources": "cdktf.TerraformDataSource"}


def resource_classes(jsii: Json, kind: str = "resources") -> dict[str, str]:
    """Terraform resource (or data source) type -> jsii fqn of its class, from each class's docs
    link."""
    found: dict[str, str] = {}
    for fqn, t in jsii["types"].items():
        if t.get("kind") != "class" or t.get("base") != _BASES[kind]:
            continue
        # "{@link https://registry.../docs/resources/deployment_v1 kubernetes_deployment_v1}":
        # the link's text is the type (the kubernetes docs path drops the provider's prefix).
        match = re.search(rf"docs/{kind}/\w+ (\w+)\}}", t.get("docs", {}).get("summary", ""))
        if match:
            found[match.group(1)] = fqn
    return found


def generate(
    resource_types: Iterable[str] | None,
    tarball: Path,
    *,
    binding: Binding = GOOGLE_BETA,
    data_sources: Iterable[str] = (),
) -> Json:
    """Schemas of the provider, of `resource_types` (None: every resource type the bindings
    hold) and of `data_sources`, read from the jsii tarball."""
    data_types = sorted(set(data_sources))
    folders = {binding.folder(t, data=True) for t in data_types} | {"provider"}
    if resource_types is None:
        folders.add("*")
    else:
        folders |= {binding.folder(t) for t in resource_types}
    assembly = _read(tarball, folders, binding)
    gen = _Generator(assembly, binding)
    out: dict[str, Json] = {}
    for kind in ("resources", "data-sources"):
        classes = resource_classes(assembly.jsii, kind)
        if kind == "data-sources":
            wanted = data_types
        else:
            wanted = sorted(classes if resource_types is None else set(resource_types))
        schemas: Json = {}
        for rtype in wanted:
            if rtype not in classes:
                what = "resource type" if kind == "resources" else "data source"
                raise SchemaError(f"{binding.name} {binding.version} has no {what} {rtype}")
            schemas[rtype] = {"version": 0, "block": gen.block(classes[rtype], rtype)}
        out[kind] = schemas
    return {
        "format_version": "1.0",
        "provider_source": binding.source,
        "provider_version": binding.version,
        "assembly": f"{binding.assembly}@{assembly.jsii['version']}",
        "provider": {
            "version": 0,
            "block": gen.provider(f"{binding.assembly}.{binding.provider_class}"),
        },
        "resource_schemas": out["resources"],
        "data_source_schemas": out["data-sources"],
    }


def ensure(
    resource_types: Iterable[str] | None,
    *,
    binding: Binding = GOOGLE_BETA,
    data_sources: Iterable[str] = (),
    cache_dir: Path = CACHE_DIR,
) -> Path:
    """The schema file for `resource_types` and `data_sources`, generated unless the cache holds
    it already (keyed by the tarball, the lists and this generator). None: every resource type
    (the Kubernetes stand-in serves them all, so a new object in a stack needs no change here)."""
    types = None if resource_types is None else sorted(set(resource_types))
    data_types = sorted(set(data_sources))
    tarball = assembly_tarball(binding)
    digest = hashlib.sha256()
    with open(tarball, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    digest.update(json.dumps([types, data_types]).encode())
    digest.update(Path(__file__).read_bytes())
    path = cache_dir / f"{binding.name}-{binding.version}-{digest.hexdigest()[:16]}.json"
    if not path.exists():
        schema = generate(types, tarball, binding=binding, data_sources=data_types)
        cache_dir.mkdir(parents=True, exist_ok=True)
        # Several rehearsals may generate at once: write aside, then rename (atomic on one fs).
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(schema, sort_keys=True))
        tmp.replace(path)
    return path


def stand_in_schema() -> Path:
    """The stand-in google-beta's schema: every faked resource type and data source, and the
    validate-only types. One list for every caller, so a session generates it once (~4 s of CPU
    per generation: the 33 MB assembly's JSON)."""
    from tools.rehearsal.resources import DATA_SOURCES, RESOURCES, VALIDATE_ONLY

    return ensure([*RESOURCES, *VALIDATE_ONLY], data_sources=DATA_SOURCES)


def load_stand_in() -> Json:
    """stand_in_schema(), read."""
    loaded: Json = json.loads(stand_in_schema().read_text())
    return loaded


def load(
    resource_types: Iterable[str] | None,
    *,
    binding: Binding = GOOGLE_BETA,
    data_sources: Iterable[str] = (),
    cache_dir: Path = CACHE_DIR,
) -> Json:
    """The schemas for `resource_types` and `data_sources` (see `ensure`)."""
    path = ensure(resource_types, binding=binding, data_sources=data_sources, cache_dir=cache_dir)
    loaded: Json = json.loads(path.read_text())
    return loaded
