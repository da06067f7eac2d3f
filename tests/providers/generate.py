"""Writes schemas/oci.json and schemas/openstack.json, the schemas of the fake providers.

The schemas come from the real providers: the cdktf bindings on PyPI (versions.json names the
packages) carry, in a jsii assembly (`package/.jsii` inside `_jsii/*.jsii.tgz` in the wheel), every
resource's and data source's arguments with their types and whether each is required, and the
compiled bindings beside it (`package/lib/<module>/index.js`) carry the attributes' Terraform names,
whether a collection is a list, a set or a map, whether it is a block, and the computed-only
attributes. What neither carries is written by hand from the providers' Go source, each entry with
the file it was read from:

  force_new.json  the attributes whose change replaces the resource (ForceNew), and the map keys
                  whose change does (CustomizeDiff's ForceNewIfChange)
  computed.json   the optional attributes that are also computed (Optional + Computed), and the
                  plugin SDK defaults (Default:) of optional attributes

Every SDKv2 resource's and data source's `id` is optional and computed; the generator says so
itself. The generator checks every hand-written path against the bindings' schema, so an entry
that names no attribute, or marks computed one that is not optional, stops it.

Each schema file holds, for the provider and each faked resource and data source, a block:
{"attributes": {name: {"type" (the plugin protocol's JSON type), "required" | "optional",
"computed", "force_new", "force_new_keys", "default"}}, "blocks": {name: {"nesting" (list, set or
single), "min_items", "max_items", "force_new", "block"}}}, with "sources" naming the Go files.

Re-run it (it downloads about 83 MB of wheels to /tmp, never into the repository):

    python3 tests/providers/generate.py            # downloads with pip, then writes the schemas
    python3 tests/providers/generate.py --wheels DIR  # reads wheels already downloaded to DIR

Both write tests/providers/schemas/*.json, which are committed: CI and the tests never download.
"""

import argparse
import gzip
import io
import json
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

META_PROPERTIES = {"tfResourceType", "internalValue", "fqn", "creationStack"}
PRIMITIVES = {"string": "string", "number": "number", "boolean": "bool", "any": "dynamic"}
MAPS = {"cdktf.StringMap": "string", "cdktf.NumberMap": "number", "cdktf.BooleanMap": "bool", "cdktf.AnyMap": "dynamic"}
READ_BY = {"getBooleanAttribute": "bool", "getStringAttribute": "string", "getNumberAttribute": "number"}
HCL_ENTRY = re.compile(
    r"^ *(?P<snake>\w+): \{\n *value: (?P<value>.*)\n *isBlock: (?P<block>true|false),\n"
    r' *type: "(?P<kind>\w+)",\n *storageClassType: "(?P<storage>\w+)",',
    re.M,
)
CHUNK = re.compile(r"^(?:class|function) (\w+)", re.M)
GETTER = re.compile(r"\bget (\w+)\(\) \{\n\s*return (.*);\n")
COMPLEX = re.compile(r'this\._(\w+) = new ([\w.]+)\(this, "(\w+)"(?:, (true|false))?\);')


class Failure(Exception):
    """The bindings do not say what the generator expects."""


class Assembly:
    """One jsii assembly and its compiled bindings."""

    def __init__(self, wheel: Path):
        with zipfile.ZipFile(wheel) as archive:
            member = next(n for n in archive.namelist() if n.endswith(".jsii.tgz"))
            tgz = archive.read(member)
        self.files = {}
        with tarfile.open(fileobj=io.BytesIO(tgz)) as tar:
            for entry in tar:
                if entry.name == "package/.jsii" or entry.name.endswith("/index.js") or ".jsii." in entry.name:
                    self.files[entry.name] = tar.extractfile(entry).read()
        manifest = json.loads(self.files["package/.jsii"])
        if manifest.get("schema") == "jsii/file-redirect":
            data = self.files["package/" + manifest["filename"]]
            manifest = json.loads(gzip.decompress(data) if manifest.get("compression") == "gzip" else data)
        self.types = manifest["types"]
        self._js = {}

    def find_class(self, name: str, kind: str) -> str:
        """The fqn of the class that stands for `name`, a resource, a data source or the provider."""
        for fqn, spec in self.types.items():
            summary = spec.get("docs", {}).get("summary", "")
            found = re.match(r"Represents a \{@link (\S+) (\w+)\}", summary)
            if not found or found.group(2) != name or spec.get("kind") != "class":
                continue
            url = found.group(1)
            if kind == "provider" and url.endswith("/docs") or f"/docs/{kind}/" in url:
                return fqn
        raise Failure(f"no class stands for the {kind} {name}")

    def js(self, fqn: str) -> dict:
        """The compiled module of a type: its classes and functions, each as its text."""
        source = self.types[fqn]["locationInModule"]["filename"]
        path = "package/lib/" + source.removeprefix("src/").removesuffix(".ts") + ".js"
        if path not in self._js:
            text = self.files[path].decode()
            starts = list(CHUNK.finditer(text))
            chunks = {}
            for i, start in enumerate(starts):
                end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
                chunks[start.group(1)] = text[start.start() : end]
            self._js[path] = chunks
        return self._js[path]

    def provider_version(self, fqn: str) -> str:
        text = self.js(fqn)[short(fqn)]
        return re.search(r"providerVersion: '([^']+)'", text).group(1)


def short(fqn: str) -> str:
    return fqn.rsplit(".", 1)[1]


def hcl_entries(text: str) -> dict:
    """The arguments a struct or a class renders, by jsii property name."""
    entries = {}
    for entry in HCL_ENTRY.finditer(text):
        camel = re.search(r"(?:struct|this)\.(?:_)?(\w+)", entry.group("value")).group(1)
        entries[camel] = {"name": entry.group("snake"), "block": entry.group("block") == "true", "kind": entry.group("kind")}
    return entries


def getters(text: str) -> dict:
    """The attributes a class reads, by jsii property name: their names and how they are read."""
    complex_ = {m.group(1): (m.group(3), m.group(2), m.group(4) == "true") for m in COMPLEX.finditer(text)}
    found = {}
    for getter in GETTER.finditer(text):
        camel, expression = getter.group(1), getter.group(2)
        named = re.search(r"this\.(\w+)\('(\w+)'\)", expression)
        if named:
            found[camel] = {"name": named.group(2), "set": "Fn.tolist" in expression, "method": named.group(1)}
            continue
        held = re.fullmatch(r"this\._(\w+)", expression)
        if held and held.group(1) in complex_:
            name, cls, is_set = complex_[held.group(1)]
            found[camel] = {"name": name, "set": is_set, "class": cls}
    return found


def jsii_type(spec: dict) -> dict:
    """A jsii type reference without the `IResolvable` cdktf adds to unions."""
    if "union" in spec:
        kept = [t for t in spec["union"]["types"] if t.get("fqn") != "cdktf.IResolvable"]
        if len(kept) != 1:
            raise Failure(f"a union of several types: {spec}")
        return kept[0]
    return spec


def attribute_type(assembly: Assembly, spec: dict, kind: str, as_set: bool):
    """The Terraform type of an attribute, in the JSON form of the plugin protocol."""
    spec = jsii_type(spec)
    if "primitive" in spec:
        return PRIMITIVES[spec["primitive"]]
    if "collection" in spec:
        element = attribute_type(assembly, spec["collection"]["elementtype"], "simple", False)
        if spec["collection"]["kind"] == "map":
            return ["map", element]
        return ["set" if kind == "set" or as_set else "list", element]
    fqn = spec["fqn"]
    if fqn in MAPS:
        return ["map", MAPS[fqn]]
    raise Failure(f"an attribute of type {fqn}")


def object_type(assembly: Assembly, output_fqn: str) -> list:
    """The object type of the elements of a computed-only nested attribute."""
    attributes = {}
    read = getters(assembly.js(output_fqn)[short(output_fqn)])
    for prop in assembly.types[output_fqn].get("properties", []):
        if prop["name"] not in read or prop["name"] in META_PROPERTIES or prop.get("static"):
            continue
        attributes[read[prop["name"]]["name"]] = computed_type(assembly, prop, read[prop["name"]])
    return ["object", attributes]


def computed_type(assembly: Assembly, prop: dict, read: dict):
    """The Terraform type of a computed-only attribute."""
    spec = jsii_type(prop["type"])
    fqn = spec.get("fqn", "")
    if fqn.endswith("List") and fqn not in MAPS:
        element = object_type(assembly, fqn.removesuffix("List") + "OutputReference")
        return ["set" if read["set"] else "list", element]
    if fqn.endswith("OutputReference"):
        return ["list", object_type(assembly, fqn)]
    if fqn == "cdktf.IResolvable":
        # cdktf reads computed booleans as tokens: the getter says what they are.
        return READ_BY[read.get("method")]
    return attribute_type(assembly, spec, "simple", read["set"])


def block_schema(assembly: Assembly, struct_fqn: str, output_fqn: str, rendered: dict) -> dict:
    """The schema of a block: its arguments (from the struct), then its computed-only attributes."""
    attributes, blocks = {}, {}
    struct = assembly.types[struct_fqn]
    arguments = set()
    for prop in struct.get("properties", []):
        if prop["name"] == "alias" and struct_fqn.endswith("ProviderConfig"):
            continue
        arguments.add(prop["name"])
        entry = rendered.get(prop["name"])
        if entry is None:
            raise Failure(f"{struct_fqn}.{prop['name']} is not rendered")
        required = not prop.get("optional", False)
        if entry["block"]:
            spec = jsii_type(prop["type"])
            single = "fqn" in spec
            inner = spec["fqn"] if single else jsii_type(spec["collection"]["elementtype"])["fqn"]
            nesting = {"list": "list", "set": "set", "struct": "single"}[entry["kind"]]
            nested = {"nesting": nesting, "min_items": 1 if required else 0, "max_items": 1 if single else 0}
            if nesting == "single":
                nested["min_items"] = nested["max_items"] = 0
            inner_rendered = hcl_entries(assembly.js(inner)[lower_first(short(inner)) + "ToHclTerraform"])
            nested["block"] = block_schema(assembly, inner, inner + "OutputReference", inner_rendered)
            blocks[entry["name"]] = nested
            continue
        flags = {"required": True} if required else {"optional": True}
        attributes[entry["name"]] = {"type": attribute_type(assembly, prop["type"], entry["kind"], False), **flags}
    if output_fqn in assembly.types:
        read = getters(assembly.js(output_fqn)[short(output_fqn)])
        for prop in assembly.types[output_fqn].get("properties", []):
            camel = prop["name"]
            if camel in arguments or camel in META_PROPERTIES or camel.endswith("Input") or prop.get("static"):
                continue
            if camel not in read:
                continue
            attributes[read[camel]["name"]] = {"type": computed_type(assembly, prop, read[camel]), "computed": True}
    return {"attributes": dict(sorted(attributes.items())), "blocks": dict(sorted(blocks.items()))}


def lower_first(name: str) -> str:
    return name[0].lower() + name[1:]


def type_schema(assembly: Assembly, name: str, kind: str) -> dict:
    fqn = assembly.find_class(name, kind)
    rendered = hcl_entries(assembly.js(fqn)[short(fqn)])
    block = block_schema(assembly, fqn + "Config", fqn, rendered)
    if block["attributes"].get("id", {}).get("optional"):
        # The plugin SDK adds `id` to every resource and data source as optional and computed.
        block["attributes"]["id"]["computed"] = True
    return block


def locate(block: dict, path: str) -> dict:
    """The attribute or nested block at a dotted path."""
    head, _, rest = path.partition(".")
    if rest:
        if head not in block["blocks"]:
            raise Failure(f"no block {head}")
        return locate(block["blocks"][head]["block"], rest)
    if head in block["attributes"]:
        return block["attributes"][head]
    if head in block["blocks"]:
        return block["blocks"][head]
    raise Failure(f"no attribute or block {head}")


def apply_overlays(provider: str, schemas: dict) -> None:
    """Marks what the hand-written files say: force-new, optional-computed and defaults."""
    force_new = json.loads((HERE / "force_new.json").read_text()).get(provider, {})
    computed = json.loads((HERE / "computed.json").read_text()).get(provider, {})
    for overlay, what in ((force_new, "force_new"), (computed, "computed")):
        for name, entry in overlay.items():
            kind = "resources" if name in schemas["resources"] else "data_sources"
            if name not in schemas[kind]:
                raise Failure(f"{what}.json: {name} is not one of the faked types")
            schemas[kind][name].setdefault("sources", {})[what] = entry["source"]
            block = schemas[kind][name]["block"]
            for path in entry.get("force_new", []):
                mark(block, name, path)["force_new"] = True
            for path, keys in entry.get("force_new_map_keys", {}).items():
                mark(block, name, path)["force_new_keys"] = sorted(keys)
            for path in entry.get("optional_computed", []):
                target = mark(block, name, path)
                if not target.get("optional"):
                    raise Failure(f"computed.json: {name}.{path} is not optional")
                target["computed"] = True
            for path, value in entry.get("defaults", {}).items():
                mark(block, name, path)["default"] = value


def mark(block: dict, name: str, path: str) -> dict:
    try:
        return locate(block, path)
    except Failure as failure:
        raise Failure(f"{name}.{path}: {failure}") from None


def generate(provider: str, spec: dict, wheel: Path) -> dict:
    assembly = Assembly(wheel)
    provider_fqn = assembly.find_class(provider, "provider")
    version = assembly.provider_version(provider_fqn)
    if version != spec["version"]:
        raise Failure(f"{wheel.name} wraps {provider} {version}, versions.json says {spec['version']}")
    rendered = hcl_entries(assembly.js(provider_fqn)[short(provider_fqn)])
    schemas = {
        "provider": {
            "source": spec["source"],
            "version": version,
            "schema_from": f"{spec['schema_from']['pypi']} {spec['schema_from']['version']}",
            "block": block_schema(assembly, provider_fqn + "Config", provider_fqn, rendered),
        },
        "resources": {name: {"block": type_schema(assembly, name, "resources")} for name in spec["resources"]},
        "data_sources": {
            name: {"block": type_schema(assembly, name, "data-sources")} for name in spec["data_sources"]
        },
    }
    apply_overlays(provider, schemas)
    return schemas


def render(value, depth: int = 0) -> str:
    """JSON with sorted keys, indented, and one attribute (a dict with a "type") to a line."""
    if not isinstance(value, dict) or not value or "type" in value:
        return json.dumps(value, sort_keys=True)
    pad = " " * (depth + 1)
    items = [f"{pad}{json.dumps(key)}: {render(value[key], depth + 1)}" for key in sorted(value)]
    return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"


def download(spec: dict, into: Path) -> Path:
    package, version = spec["schema_from"]["pypi"], spec["schema_from"]["version"]
    pattern = f"{package.replace('-', '_')}-{version}-*.whl"
    found = sorted(into.glob(pattern))
    if not found:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(into), f"{package}=={version}"]
        subprocess.run(command, check=True)
        found = sorted(into.glob(pattern))
    if not found:
        raise Failure(f"no wheel {pattern} in {into}")
    return found[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheels", type=Path, default=Path("/tmp/cms-provider-wheels"), help="where the wheels are")
    parser.add_argument("providers", nargs="*", default=["oci", "openstack"])
    args = parser.parse_args()
    args.wheels.mkdir(parents=True, exist_ok=True)
    versions = json.loads((HERE / "versions.json").read_text())
    (HERE / "schemas").mkdir(exist_ok=True)
    for provider in args.providers:
        try:
            schemas = generate(provider, versions[provider], download(versions[provider], args.wheels))
        except Failure as failure:
            print(f"generate.py: {provider}: {failure}", file=sys.stderr)
            return 1
        out = HERE / "schemas" / f"{provider}.json"
        out.write_text(render(schemas) + "\n")
        print(f"wrote {out.relative_to(HERE)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
