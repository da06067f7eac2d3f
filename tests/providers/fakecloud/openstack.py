"""The fake `terraform-provider-openstack/openstack`: each resource kind, after Nova, Neutron and
Octavia."""

import base64
import hashlib

from .behaviour import Cloud, Kind, Refusal, set_if_unknown

USER_DATA_LIMIT = 65535
TENANT = "fake-tenant"


def sha1_hex(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def regional(cloud: Cloud, state: dict) -> None:
    set_if_unknown(state, "region", cloud.region or "RegionOne")
    set_if_unknown(state, "tenant_id", TENANT)


class Instance(Kind):
    """openstack_compute_instance_v2: ports on the network; user_data kept as its SHA-1."""

    def plan(self, prior, planned):
        # The provider's StateFunc keeps the SHA-1 hex of user_data in state. A value equal to
        # the prior state's is that hash already (lifecycle.ignore_changes puts it back).
        value = planned.get("user_data")
        if isinstance(value, str) and not (prior is not None and value == prior.get("user_data")):
            planned["user_data"] = sha1_hex(value)

    def check(self, cloud, state, config):
        user_data = config.get("user_data")
        if isinstance(user_data, str):
            encoded = len(base64.b64encode(user_data.encode()))
            if encoded > USER_DATA_LIMIT:
                raise Refusal(
                    "Error creating OpenStack server: Bad request with: [POST servers], error message: "
                    f"User data too large. User data must be no larger than {USER_DATA_LIMIT} bytes once "
                    f"base64 encoded. Your data is {encoded} bytes",
                )
        if not isinstance(state.get("flavor_id"), str) and not isinstance(state.get("flavor_name"), str):
            raise Refusal("Error creating OpenStack server: a flavor_id or a flavor_name is required")

    def fill(self, cloud, state, config):
        for network in state.get("network") or []:
            set_if_unknown(network, "fixed_ip_v4", cloud.address())
            set_if_unknown(network, "uuid", cloud.uuid())
            set_if_unknown(network, "name", "fake-network")
            set_if_unknown(network, "port", cloud.uuid())
            set_if_unknown(network, "fixed_ip_v6", None)
            octets = [int(part) for part in network["fixed_ip_v4"].split(".")]
            network["mac"] = "fa:16:3e:{:02x}:{:02x}:{:02x}".format(*octets[1:])
        networks = state.get("network") or []
        access = next((n for n in networks if n.get("access_network")), networks[0] if networks else None)
        set_if_unknown(state, "access_ip_v4", access["fixed_ip_v4"] if access else cloud.address())
        set_if_unknown(state, "access_ip_v6", None)
        set_if_unknown(state, "flavor_id", "fake-flavor-" + str(state.get("flavor_name")))
        set_if_unknown(state, "flavor_name", "fake-flavor-" + str(state.get("flavor_id")))
        set_if_unknown(state, "image_id", cloud.uuid())
        set_if_unknown(state, "image_name", "fake-image")
        set_if_unknown(state, "availability_zone", "nova")
        set_if_unknown(state, "security_groups", ["default"])
        set_if_unknown(state, "region", cloud.region or "RegionOne")
        state["all_metadata"] = dict(state.get("metadata") or {})
        state["all_tags"] = list(state.get("tags") or [])
        state["created"] = cloud.now()
        state["updated"] = state["created"]

    def refill(self, cloud, prior, state, config):
        state["all_metadata"] = dict(state.get("metadata") or {})
        state["all_tags"] = list(state.get("tags") or [])

    def boot(self, state, config):
        return {"user_data": config.get("user_data")}


class SecurityGroup(Kind):
    """openstack_networking_secgroup_v2."""

    def fill(self, cloud, state, config):
        regional(cloud, state)
        set_if_unknown(state, "description", "")
        set_if_unknown(state, "stateful", True)
        state["all_tags"] = list(state.get("tags") or [])

    def refill(self, cloud, prior, state, config):
        state["all_tags"] = list(state.get("tags") or [])


class SecurityRule(Kind):
    """openstack_networking_secgroup_rule_v2: every change replaces it (it has no update)."""

    def fill(self, cloud, state, config):
        regional(cloud, state)
        set_if_unknown(state, "remote_group_id", None)
        set_if_unknown(state, "remote_ip_prefix", None)


class LoadBalancer(Kind):
    """openstack_lb_loadbalancer_v2: a VIP port with an address from the network."""

    def fill(self, cloud, state, config):
        regional(cloud, state)
        set_if_unknown(state, "vip_address", cloud.address())
        set_if_unknown(state, "vip_port_id", cloud.uuid())
        set_if_unknown(state, "vip_network_id", cloud.uuid())
        set_if_unknown(state, "vip_subnet_id", cloud.uuid())
        set_if_unknown(state, "loadbalancer_provider", "amphora")
        set_if_unknown(state, "flavor_id", None)


class Listener(Kind):
    """openstack_lb_listener_v2."""

    def fill(self, cloud, state, config):
        regional(cloud, state)
        for name, value in (
            ("connection_limit", -1),
            ("timeout_client_data", 50000),
            ("timeout_member_connect", 5000),
            ("timeout_member_data", 50000),
            ("timeout_tcp_inspect", 0),
        ):
            set_if_unknown(state, name, value)


class Pool(Kind):
    """openstack_lb_pool_v2."""

    def check(self, cloud, state, config):
        if not isinstance(state.get("loadbalancer_id"), str) and not isinstance(state.get("listener_id"), str):
            raise Refusal("Error creating pool: one of loadbalancer_id or listener_id must be given")

    def fill(self, cloud, state, config):
        regional(cloud, state)


class Member(Kind):
    """openstack_lb_member_v2."""

    def fill(self, cloud, state, config):
        regional(cloud, state)
        set_if_unknown(state, "weight", 1)


class Monitor(Kind):
    """openstack_lb_monitor_v2: HTTP monitors get Octavia's defaults."""

    def fill(self, cloud, state, config):
        regional(cloud, state)
        http = state.get("type") in ("HTTP", "HTTPS")
        set_if_unknown(state, "url_path", "/" if http else None)
        set_if_unknown(state, "http_method", "GET" if http else None)
        set_if_unknown(state, "expected_codes", "200" if http else None)


class FloatingIp(Kind):
    """openstack_networking_floatingip_v2: an address from the network."""

    def fill(self, cloud, state, config):
        regional(cloud, state)
        set_if_unknown(state, "address", cloud.address())
        set_if_unknown(state, "port_id", None)
        set_if_unknown(state, "fixed_ip", None)
        state["all_tags"] = list(state.get("tags") or [])

    def refill(self, cloud, prior, state, config):
        state["all_tags"] = list(state.get("tags") or [])


class FloatingIpAssociation(Kind):
    """openstack_networking_floatingip_associate_v2: its id is the floating IP's."""

    def new_id(self, cloud, state):
        for entry in cloud.record.all("openstack_networking_floatingip_v2"):
            if entry["attributes"].get("address") == state.get("floating_ip"):
                return entry["id"]
        return cloud.uuid()

    def fill(self, cloud, state, config):
        set_if_unknown(state, "region", cloud.region or "RegionOne")
        set_if_unknown(state, "fixed_ip", None)


RESOURCES = {
    "openstack_compute_instance_v2": Instance(),
    "openstack_networking_secgroup_v2": SecurityGroup(),
    "openstack_networking_secgroup_rule_v2": SecurityRule(),
    "openstack_lb_loadbalancer_v2": LoadBalancer(),
    "openstack_lb_listener_v2": Listener(),
    "openstack_lb_pool_v2": Pool(),
    "openstack_lb_member_v2": Member(),
    "openstack_lb_monitor_v2": Monitor(),
    "openstack_networking_floatingip_v2": FloatingIp(),
    "openstack_networking_floatingip_associate_v2": FloatingIpAssociation(),
}
DATA_SOURCES = {}
