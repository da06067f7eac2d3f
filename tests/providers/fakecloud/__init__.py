"""A fake cloud provider for the test engine, built from a real provider's schema.

Run it as the engine runs a provider plugin:

    python tests/providers/fakecloud <oci|openstack> --record DIR --network A.B.C.0/24

It speaks the provider plugin protocol through PyPI `tf` and keeps a cloud record in DIR
(record.py says its layout). schemas/<provider>.json (generate.py writes it) gives the schema;
oci.py and openstack.py say how each resource kind and data source behaves.

Modules: schema.py (the schema as `tf` objects, walks over values), plan.py (planning as the
plugin SDK plans), record.py (the cloud record), behaviour.py (what the kinds share), oci.py and
openstack.py (the kinds), provider.py (the provider and its protocol calls), cli.py (arguments).
"""
