"""The provider: `tf`'s Provider, Resource and DataSource built from a schema file, and the
plugin protocol calls `tf` cannot serve as an SDKv2 provider does.

`tf` 1.2.0 plans a new resource by making its top-level computed attributes unknown only (not
those in nested blocks), asks for a replacement on top-level attributes only, passes no
configuration to `create`, and answers a destroy plan with an error although it announces
`plan_destroy`. `Servicer` replaces PlanResourceChange and ApplyResourceChange with the SDK's
behaviour (plan.py) and says, as every SDKv2 provider does, that it uses the legacy type system,
so that the engine takes a state function's rewrite (OpenStack's user_data hash) as SDKv2's.
"""

import sys
from copy import deepcopy

from tf import provider as tfprovider
from tf.gen import tfplugin_pb2 as pb
from tf.iface import CreateContext, DataSource, DeleteContext, Provider, ReadContext, Resource, UpdateContext
from tf.utils import Diagnostics, read_dynamic_value, to_dynamic_value

from .behaviour import Cloud, Refusal, name_of
from .plan import attribute_path, plan_block, replacements
from .record import Exhausted, Record
from .schema import conform, settle, tf_schema


class Generated:
    """What a generated resource or data source type answers from its `type_name` and `block`."""

    type_name = ""
    block: dict = {}

    def __init__(self, provider: "FakeCloud"):
        self.provider = provider

    @classmethod
    def get_name(cls) -> str:
        return cls.type_name

    @classmethod
    def get_schema(cls):
        return tf_schema(cls.block)


class FakeResource(Generated, Resource):
    """One resource type; `type_name`, `block` and `kind` are set on each generated subclass."""

    kind = None

    def create(self, ctx: CreateContext, planned: dict) -> dict | None:
        cloud = self.provider.cloud()
        state = deepcopy(planned)
        config = getattr(ctx, "config", None) or {}
        self.kind.check(cloud, state, config)
        state["id"] = self.kind.new_id(cloud, state)
        self.kind.fill(cloud, state, config)
        state = settle(self.block, state)
        self.provider.record.write(self.type_name, state["id"], state, self.kind.boot(state, config))
        self.provider.record.event("create", self.type_name, state["id"], name_of(state))
        return state

    def read(self, ctx: ReadContext, current: dict) -> dict | None:
        entry = self.provider.record.read(self.type_name, current["id"])
        return None if entry is None else conform(self.block, entry["attributes"])

    def update(self, ctx: UpdateContext, current: dict, planned: dict) -> dict | None:
        cloud = self.provider.cloud()
        state = deepcopy(planned)
        config = getattr(ctx, "config", None) or {}
        self.kind.check(cloud, state, config)
        state["id"] = current["id"]
        self.kind.refill(cloud, current, state, config)
        state = settle(self.block, state)
        entry = self.provider.record.read(self.type_name, state["id"]) or {}
        boot = self.kind.boot(state, config)
        if boot is not None and entry.get("boot") is not None:
            # An update does not reboot the machine with new user data.
            boot = entry["boot"]
        self.provider.record.write(self.type_name, state["id"], state, boot)
        self.provider.record.event("update", self.type_name, state["id"], name_of(state))
        return state

    def delete(self, ctx: DeleteContext, current: dict):
        self.provider.record.remove(self.type_name, current["id"])
        self.provider.record.event("delete", self.type_name, current["id"], name_of(current))


class FakeDataSource(Generated, DataSource):
    """One data source; `type_name`, `block` and `reader` are set on each generated subclass."""

    reader = None

    def read(self, ctx, config: dict) -> dict:
        found = type(self).reader(self.provider.cloud(), config)
        merged = {name: value for name, value in config.items() if value is not None}
        merged.update(found)
        return settle(self.block, conform(self.block, merged))


class FakeCloud(Provider):
    """A fake cloud provider driven by one schema file and one behaviour table."""

    def __init__(self, schemas: dict, table, record: Record):
        self.schemas = schemas
        self.record = record
        self.region = None
        self.resources = [
            type(name, (FakeResource,), {"type_name": name, "block": spec["block"], "kind": table.RESOURCES[name]})
            for name, spec in schemas["resources"].items()
        ]
        self.data_sources = [
            type(name, (FakeDataSource,), {"type_name": name, "block": spec["block"], "reader": staticmethod(table.DATA_SOURCES[name])})
            for name, spec in schemas["data_sources"].items()
        ]

    def cloud(self) -> Cloud:
        return Cloud(self.record, self.region)

    def get_model_prefix(self) -> str:
        return ""

    def get_provider_schema(self, diags: Diagnostics):
        return tf_schema(self.schemas["provider"]["block"])

    def full_name(self) -> str:
        return "registry.terraform.io/" + self.schemas["provider"]["source"]

    def validate_config(self, diags: Diagnostics, config: dict):
        """Every argument of the real provider is accepted; their values are not checked."""

    def configure_provider(self, diags: Diagnostics, config: dict):
        self.region = (config or {}).get("region")

    def get_data_sources(self) -> list:
        return self.data_sources

    def get_resources(self) -> list:
        return self.resources


class ApplyContext(CreateContext):
    """A create or update context that also carries the configuration, as SDKv2's ResourceData does."""

    config: dict | None = None


class Servicer(tfprovider.ProviderServicer):
    """`tf`'s servicer, with planning and applying done as the plugin SDK does them."""

    @tfprovider._log_errors
    def PlanResourceChange(self, request, context):
        klass = self._get_res_cls(request.type_name)
        prior = read_dynamic_value(request.prior_state)
        proposed = read_dynamic_value(request.proposed_new_state)
        if proposed is None:
            return pb.PlanResourceChange.Response(planned_state=to_dynamic_value(None), legacy_type_system=True)
        planned = plan_block(klass.block, prior, proposed)
        klass.kind.plan(prior, planned)
        replace = [] if prior is None else replacements(klass.block, prior, planned)
        return pb.PlanResourceChange.Response(
            planned_state=to_dynamic_value(conform(klass.block, planned)),
            requires_replace=[attribute_path(path) for path in replace],
            planned_private=request.prior_private,
            legacy_type_system=True,
        )

    @tfprovider._log_errors
    def ApplyResourceChange(self, request, context):
        klass = self._get_res_cls(request.type_name)
        resource = self.app.new_resource(klass)
        prior = read_dynamic_value(request.prior_state)
        planned = read_dynamic_value(request.planned_state)
        diags = Diagnostics()
        ctx = ApplyContext(diags, request.type_name)
        ctx.config = read_dynamic_value(request.config) or {}
        try:
            if planned is None:
                resource.delete(DeleteContext(diags, request.type_name), prior)
                new_state = None
            elif prior is None:
                new_state = resource.create(ctx, planned)
            else:
                new_state = resource.update(ctx, prior, planned)
        except (Refusal, Exhausted) as refusal:
            diags.add_error(getattr(refusal, "summary", str(refusal)), getattr(refusal, "detail", ""))
            new_state = prior
        return pb.ApplyResourceChange.Response(
            new_state=to_dynamic_value(None if new_state is None else conform(klass.block, new_state)),
            private=request.planned_private,
            diagnostics=diags.to_pb(),
            legacy_type_system=True,
        )


def serve(provider: FakeCloud) -> None:
    """Serves the provider over the plugin protocol with `tf`'s runner and this servicer."""
    from tf import runner

    # run_provider builds `tf.provider.ProviderServicer(provider)` when it starts.
    tfprovider.ProviderServicer = Servicer
    runner.run_provider(provider, sys.argv)
