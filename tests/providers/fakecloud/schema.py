"""A schema file (schemas/<provider>.json) as `tf` schema objects, and walks over values of it.

`tf` 1.2.0 has no object types and no list nesting of blocks, both of which the real schemas
need (SDKv2 providers render `TypeList` of `Elem: &schema.Resource` as list-nested blocks, and
computed nested lists as lists of objects). Two small classes fill the gap: `CtyType` carries any
type in the plugin protocol's JSON form, and `NestedBlockOf` any nesting mode. Both pass values
through untouched: the provider works on the values as the protocol carries them.
"""

import json

from tf import schema as tfschema
from tf import types as tftypes
from tf.gen import tfplugin_pb2 as pb
from tf.types import Unknown

NESTING = {
    "list": pb.Schema.NestedBlock.NestingMode.LIST,
    "set": pb.Schema.NestedBlock.NestingMode.SET,
    "single": pb.Schema.NestedBlock.NestingMode.SINGLE,
}


class CtyType(tftypes.TfType):
    """Any Terraform type, given in the JSON form of the plugin protocol."""

    def __init__(self, spec):
        self.spec = spec

    def encode(self, value):
        return value

    def decode(self, value):
        return value

    def tf_type(self) -> bytes:
        return json.dumps(self.spec, separators=(",", ":")).encode()


class NestedBlockOf(tfschema.NestedBlock):
    """A nested block in any nesting mode (list, set or single)."""

    def __init__(self, name: str, spec: dict):
        super().__init__(name, tfschema.NestMode.Set, tf_block(spec["block"]), spec["min_items"], spec["max_items"])
        self.nesting = spec["nesting"]

    def to_pb(self) -> pb.Schema.NestedBlock:
        return pb.Schema.NestedBlock(
            type_name=self.type_name,
            block=self.block.to_pb(),
            nesting=NESTING[self.nesting],
            min_items=self.min_items,
            max_items=self.max_items,
        )

    def encode(self, value):
        return value

    def decode(self, value):
        return value

    def semantically_equal(self, a_decoded, b_decoded) -> bool:
        return a_decoded == b_decoded


def tf_attributes(block: dict) -> list:
    return [
        tfschema.Attribute(
            name,
            CtyType(spec["type"]),
            required=spec.get("required", False),
            optional=spec.get("optional", False),
            computed=spec.get("computed", False),
        )
        for name, spec in block["attributes"].items()
    ]


def tf_block(block: dict) -> tfschema.Block:
    nested = [NestedBlockOf(name, spec) for name, spec in block["blocks"].items()]
    return tfschema.Block(attributes=tf_attributes(block), block_types=nested)


def tf_schema(block: dict) -> tfschema.Schema:
    """The `tf` schema of a resource, a data source or the provider, at schema version 0."""
    nested = [NestedBlockOf(name, spec) for name, spec in block["blocks"].items()]
    return tfschema.Schema(attributes=tf_attributes(block), block_types=nested, version=0)


def conform(block: dict, value: dict | None) -> dict:
    """The value with every attribute and block of the schema present, as the protocol needs."""
    value = value or {}
    out = {name: value.get(name) for name in block["attributes"]}
    for name, nested in block["blocks"].items():
        items = value.get(name)
        if items is Unknown:
            out[name] = Unknown
        elif nested["nesting"] == "single":
            out[name] = None if items is None else conform(nested["block"], items)
        else:
            out[name] = [conform(nested["block"], item) for item in items or []]
    return out


def settle(block: dict, value: dict) -> dict:
    """The value with what is still unknown after apply made empty: {} for maps, [] for
    collections, null for the rest, as the plugin SDK stores what the API left out."""
    out = {}
    for name, spec in block["attributes"].items():
        item = value.get(name)
        out[name] = empty_of(spec["type"]) if item is Unknown else item
    for name, nested in block["blocks"].items():
        items = value.get(name)
        if items is Unknown or items is None:
            out[name] = None if nested["nesting"] == "single" else []
        elif nested["nesting"] == "single":
            out[name] = settle(nested["block"], items)
        else:
            out[name] = [settle(nested["block"], item) for item in items]
    return out


def empty_of(spec):
    if isinstance(spec, list) and spec[0] == "map":
        return {}
    if isinstance(spec, list) and spec[0] in ("list", "set"):
        return []
    return None


def same(spec, a, b) -> bool:
    """Whether two known values of a type are equal (sets in any order)."""
    if isinstance(spec, list) and spec[0] == "set" and isinstance(a, list) and isinstance(b, list):
        return sorted(map(canonical, a)) == sorted(map(canonical, b))
    return a == b


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)
