"""The command line of the fake provider."""

import argparse
import importlib
import ipaddress
import json
from pathlib import Path

from .provider import FakeCloud, serve
from .record import Record

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(prog="fakecloud", description="A fake cloud provider plugin for the test engine.")
    parser.add_argument("provider", choices=["oci", "openstack"])
    parser.add_argument("--record", type=Path, required=True, help="the cloud record directory")
    parser.add_argument("--network", type=ipaddress.ip_network, required=True, help="where addresses come from")
    args = parser.parse_args(argv)
    schemas = json.loads((SCHEMAS / f"{args.provider}.json").read_text())
    table = importlib.import_module(f"fakecloud.{args.provider}")
    serve(FakeCloud(schemas, table, Record(args.record, str(args.network))))
    return 0
