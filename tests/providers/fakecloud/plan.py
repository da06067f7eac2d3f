"""Planning as the plugin SDK (SDKv2) plans: defaults, unknown computed values, replacements.

Terraform hands the provider its proposed new state: the configuration, with the prior state's
values where an attribute is computed and the configuration leaves it out. The plan keeps those,
puts each attribute's SDK default where the configuration is null, and marks every other computed
attribute that is still null unknown when the object (or the block element) is new. A change of a
force-new attribute, of a force-new block, or of a force-new key of a map, asks for a replacement.
"""

from tf.gen import tfplugin_pb2 as pb
from tf.types import Unknown

from .schema import canonical, same


def plan_block(block: dict, prior: dict | None, proposed: dict) -> dict:
    """The planned value of one block (the resource itself, or one element of a nested block)."""
    out = {}
    for name, spec in block["attributes"].items():
        value = proposed.get(name)
        if value is None and "default" in spec:
            value = spec["default"]
        elif value is None and spec.get("computed"):
            value = Unknown if prior is None else prior.get(name)
        out[name] = value
    for name, nested in block["blocks"].items():
        out[name] = plan_nested(nested, (prior or {}).get(name) if prior is not None else None, proposed.get(name))
    return out


def plan_nested(nested: dict, prior, proposed):
    inner = nested["block"]
    if proposed is Unknown:
        return Unknown
    if nested["nesting"] == "single":
        return None if proposed is None else plan_block(inner, prior, proposed)
    prior = prior or []
    items = proposed or []
    if nested["nesting"] == "list":
        return [plan_block(inner, prior[i] if i < len(prior) else None, item) for i, item in enumerate(items)]
    return [plan_block(inner, matching(inner, prior, item), item) for item in items]


def matching(block: dict, prior: list, item: dict) -> dict | None:
    """The element of a prior set that a proposed element stands for: equal where configured."""
    for candidate in prior:
        if all(
            item.get(name) == candidate.get(name) or spec.get("computed") and item.get(name) is None
            for name, spec in block["attributes"].items()
        ):
            return candidate
    return None


def replacements(block: dict, prior: dict, planned: dict, path: tuple = ()) -> list:
    """The paths whose change forces a replacement, as the SDK's ForceNew and CustomizeDiff say."""
    found = []
    for name, spec in block["attributes"].items():
        old, new = prior.get(name), planned.get(name)
        if spec.get("force_new") and changed(spec["type"], old, new):
            found.append(path + (name,))
        elif spec.get("force_new_keys") and isinstance(new, dict):
            # customdiff.ForceNewIfChange runs only on known values.
            old = old or {}
            if any(old.get(key) != new.get(key) for key in spec["force_new_keys"]):
                found.append(path + (name,))
    for name, nested in block["blocks"].items():
        old, new = prior.get(name), planned.get(name)
        if nested.get("force_new") and block_changed(nested, old, new):
            found.append(path + (name,))
        elif nested["nesting"] == "single":
            found += replacements(nested["block"], old or {}, new or {}, path + (name,))
        elif nested["nesting"] == "list":
            old, new = old or [], new if isinstance(new, list) else []
            for i in range(max(len(old), len(new))):
                before = old[i] if i < len(old) else {}
                after = new[i] if i < len(new) else {}
                found += replacements(nested["block"], before, after, path + (name, i))
        elif block_changed(nested, old, new) and forces_anything(nested["block"]):
            found.append(path + (name,))
    return found


def changed(spec, old, new) -> bool:
    if new is Unknown:
        return old is not Unknown
    return not same(spec, old, new)


def block_changed(nested: dict, old, new) -> bool:
    if new is Unknown:
        return True
    if nested["nesting"] == "set":
        return sorted(map(canonical, old or [])) != sorted(map(canonical, new or []))
    return (old or ([] if nested["nesting"] != "single" else None)) != (new or ([] if nested["nesting"] != "single" else None))


def forces_anything(block: dict) -> bool:
    return any(spec.get("force_new") for spec in block["attributes"].values()) or any(
        nested.get("force_new") or forces_anything(nested["block"]) for nested in block["blocks"].values()
    )


def attribute_path(path: tuple) -> pb.AttributePath:
    steps = [
        pb.AttributePath.Step(element_key_int=step) if isinstance(step, int) else pb.AttributePath.Step(attribute_name=step)
        for step in path
    ]
    return pb.AttributePath(steps=steps)
