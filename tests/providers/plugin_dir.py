"""Lays out a plugin directory the engine installs the fake providers from.

    python plugin_dir.py DEST --record DIR --network A.B.C.0/24 [--python PYTHON]

writes, for oracle/oci and terraform-provider-openstack/openstack at the versions of
versions.json, under both registry.terraform.io and registry.opentofu.org, the unpacked layout of
a filesystem mirror:

    DEST/<host>/<namespace>/<type>/<version>/<os>_<arch>/terraform-provider-<type>_v<version>

each a shell script that runs the fake provider (fakecloud/) with PYTHON (this interpreter unless
told) and the record directory and network baked in. `tofu init -plugin-dir=DEST` installs both.
"""

import argparse
import ipaddress
import json
import platform
import shlex
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HOSTS = ("registry.terraform.io", "registry.opentofu.org")
ARCHES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def target() -> str:
    """The engine's platform, as provider packages name it (linux_amd64 on CI)."""
    return f"{platform.system().lower()}_{ARCHES.get(platform.machine().lower(), platform.machine().lower())}"


def shim(python: str, provider: str, record: Path, network: str) -> str:
    command = [python, str(HERE / "fakecloud"), provider, "--record", str(record), "--network", network]
    return "#!/bin/sh\nexec " + " ".join(shlex.quote(part) for part in command) + "\n"


def lay_out(dest: Path, record: Path, network: str, python: str) -> list:
    """Writes the plugin directory; returns the paths of the executables written."""
    versions = json.loads((HERE / "versions.json").read_text())
    written = []
    for provider, spec in versions.items():
        namespace, kind = spec["source"].split("/")
        for host in HOSTS:
            folder = dest / host / namespace / kind / spec["version"] / target()
            folder.mkdir(parents=True, exist_ok=True)
            executable = folder / f"terraform-provider-{kind}_v{spec['version']}"
            executable.write_text(shim(python, provider, record, network))
            executable.chmod(0o755)
            written.append(executable)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--record", type=Path, required=True)
    parser.add_argument("--network", required=True)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    network = str(ipaddress.ip_network(args.network, strict=False))
    args.record.mkdir(parents=True, exist_ok=True)
    for path in lay_out(args.dest.resolve(), args.record.resolve(), network, args.python):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
