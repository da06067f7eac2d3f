"""What every resource kind of the fake clouds shares: the seam each provider's table fills in."""

import datetime
import uuid

from tf.types import Unknown

from .record import Record


class Refusal(Exception):
    """The cloud's API refuses the request: the engine shows it as an error diagnostic."""

    def __init__(self, summary: str, detail: str = ""):
        super().__init__(summary)
        self.summary = summary
        self.detail = detail


class Cloud:
    """What a resource kind may ask of the fake cloud while it handles one request."""

    def __init__(self, record: Record, region: str):
        self.record = record
        self.region = region

    def address(self) -> str:
        return self.record.address()

    def number(self) -> int:
        return self.record.number()

    @staticmethod
    def now() -> str:
        return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

    @staticmethod
    def uuid() -> str:
        return str(uuid.uuid4())


class Kind:
    """How the fake cloud treats one resource type; the default is a plain object with an id."""

    def new_id(self, cloud: Cloud, state: dict) -> str:
        return cloud.uuid()

    def plan(self, prior: dict | None, planned: dict) -> None:
        """Rewrites planned values as the provider's StateFuncs do."""

    def check(self, cloud: Cloud, state: dict, config: dict) -> None:
        """Raises Refusal where the cloud's API refuses the object."""

    def fill(self, cloud: Cloud, state: dict, config: dict) -> None:
        """Sets the computed attributes of a new object."""

    def refill(self, cloud: Cloud, prior: dict, state: dict, config: dict) -> None:
        """Sets the computed attributes an update changes."""

    def boot(self, state: dict, config: dict) -> dict | None:
        """The boot record of an instance: {"user_data": ...}; None for other kinds."""
        return None


def name_of(state: dict):
    """The name an event carries: display_name, else name, else null."""
    for key in ("display_name", "name"):
        if isinstance(state.get(key), str):
            return state[key]
    return None


def set_if_unknown(values: dict, name: str, value) -> None:
    """Sets a computed value the plan left unknown (the configuration did not give it)."""
    if values.get(name) is Unknown:
        values[name] = value
