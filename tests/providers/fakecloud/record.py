"""The cloud record: what the fake cloud holds, in a directory the test harness reads.

    <record>/resources/<type>/<id>.json   {"type", "id", "attributes" (as in state), "boot"
                                          (instances only: {"user_data": what the machine boots
                                          with})}, written atomically; removed on delete. An id
                                          that holds "/" (OCI's composite ids) is named with its
                                          "/" written "%2F".
    <record>/events.jsonl                 one line per change: {"op", "type", "id", "name", "at"
                                          (unix millis)}, appended in one write with O_APPEND
    <record>/next-address                 the next host number of --network to hand out (from 2)
    <record>/next-number                  the next number of the fake OCIDs (from 1)

Several provider processes (one per engine run and provider) share a record directory: the two
counters are read and bumped under `fcntl.flock`, so an address or a number is never handed out
twice.
"""

import fcntl
import ipaddress
import json
import os
import threading
import time
from pathlib import Path


class Exhausted(Exception):
    """The network has no address left to hand out."""


class Record:
    """One record directory and the network its addresses come from."""

    def __init__(self, root: Path, network: str):
        self.root = root
        self.network = ipaddress.ip_network(network, strict=False)
        (root / "resources").mkdir(parents=True, exist_ok=True)

    def path(self, type_name: str, resource_id: str) -> Path:
        return self.root / "resources" / type_name / (resource_id.replace("/", "%2F") + ".json")

    def read(self, type_name: str, resource_id: str) -> dict | None:
        try:
            return json.loads(self.path(type_name, resource_id).read_text())
        except FileNotFoundError:
            return None

    def all(self, type_name: str) -> list:
        folder = self.root / "resources" / type_name
        return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []

    def write(self, type_name: str, resource_id: str, attributes: dict, boot: dict | None) -> None:
        entry = {"type": type_name, "id": resource_id, "attributes": attributes}
        if boot is not None:
            entry["boot"] = boot
        target = self.path(type_name, resource_id)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        temporary.write_text(json.dumps(entry, indent=1, sort_keys=True) + "\n")
        os.replace(temporary, target)

    def remove(self, type_name: str, resource_id: str) -> None:
        self.path(type_name, resource_id).unlink(missing_ok=True)

    def event(self, op: str, type_name: str, resource_id: str, name) -> None:
        line = {"op": op, "type": type_name, "id": resource_id, "name": name, "at": int(time.time() * 1000)}
        data = (json.dumps(line, sort_keys=True) + "\n").encode()
        descriptor = os.open(self.root / "events.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, data)
        finally:
            os.close(descriptor)

    def address(self) -> str:
        """The next address of the network, from its .2 on."""
        host = self._bump("next-address", 2)
        if host >= self.network.num_addresses - 1:
            raise Exhausted(f"no address is left in {self.network}")
        return str(self.network.network_address + host)

    def number(self) -> int:
        """The next number of the fake OCIDs, from 1 on."""
        return self._bump("next-number", 1)

    def _bump(self, name: str, first: int) -> int:
        descriptor = os.open(self.root / name, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            text = os.read(descriptor, 64).decode().strip()
            value = int(text) if text else first
            os.lseek(descriptor, 0, os.SEEK_SET)
            os.ftruncate(descriptor, 0)
            os.write(descriptor, f"{value + 1}\n".encode())
            return value
        finally:
            os.close(descriptor)
