"""The fake `oracle/oci`: how each resource kind and data source behaves, after OCI's API."""

from urllib.parse import quote

from .behaviour import Cloud, Kind, Refusal, set_if_unknown

METADATA_LIMIT = 32000
AMPERE = (".A1.", ".A2.", ".A4.")
SHAPES = [
    "VM.Standard2.1",
    "VM.Standard2.2",
    "VM.Standard.E2.1.Micro",
    "VM.Standard3.Flex",
    "VM.Standard.E3.Flex",
    "VM.Standard.E4.Flex",
    "VM.Standard.E5.Flex",
    "VM.Optimized3.Flex",
    "VM.DenseIO.E4.Flex",
    "BM.Standard3.64",
    "BM.Standard.E4.128",
    "VM.Standard.A1.Flex",
    "BM.Standard.A1.160",
    "VM.Standard.A2.Flex",
    "VM.Standard.A4.Flex",
]


def ocid(cloud: Cloud, kind: str) -> str:
    return f"ocid1.{kind}.oc1..{cloud.number()}"


def first(items) -> dict:
    return items[0] if isinstance(items, list) and items else {}


def truthy(value) -> bool:
    return str(value).lower() == "true"


class Instance(Kind):
    """oci_core_instance: a machine with a VNIC on the network."""

    def new_id(self, cloud, state):
        return ocid(cloud, "instance")

    def check(self, cloud, state, config):
        shape = state.get("shape")
        if not isinstance(shape, str):
            raise Refusal("400-MissingParameter, shape is required", "LaunchInstance needs a shape.")
        shape_config = first(config.get("shape_config"))
        if shape.endswith(".Flex"):
            if shape_config.get("ocpus") is None:
                raise Refusal(
                    "400-InvalidParameter, Shape " + shape + " is a flexible shape: shapeConfig.ocpus is required",
                    "LaunchInstance of a flexible shape needs shape_config with ocpus.",
                )
        elif shape_config.get("ocpus") is not None or shape_config.get("memory_in_gbs") is not None:
            raise Refusal(
                "400-InvalidParameter, Shape " + shape + " is not a flexible shape: shapeConfig is not allowed",
                "A fixed shape takes no shape_config with ocpus or memory_in_gbs.",
            )
        metadata = state.get("metadata") or {}
        size = sum(len(key.encode()) + len(str(value).encode()) for key, value in metadata.items())
        if size > METADATA_LIMIT:
            raise Refusal(
                f"400-InvalidParameter, metadata is {size} bytes: the limit is {METADATA_LIMIT} bytes",
                "The metadata of an instance, user_data included, must not exceed 32,000 bytes.",
            )

    def fill(self, cloud, state, config):
        vnic = first(state.get("create_vnic_details"))
        wanted = first(config.get("create_vnic_details"))
        private_ip = wanted.get("private_ip") or cloud.address()
        # assign_public_ip defaults to "true" (a string: the provider's schema says so).
        public = truthy(vnic.get("assign_public_ip") or "true") if vnic else True
        state["private_ip"] = private_ip
        state["public_ip"] = cloud.address() if public else None
        if vnic:
            set_if_unknown(vnic, "private_ip", private_ip)
            set_if_unknown(vnic, "subnet_id", state.get("subnet_id") if isinstance(state.get("subnet_id"), str) else None)
            set_if_unknown(vnic, "skip_source_dest_check", False)
            set_if_unknown(vnic, "assign_ipv6ip", False)
        set_if_unknown(state, "state", "RUNNING")
        set_if_unknown(state, "display_name", "instance" + cloud.now()[:19].replace("-", "").replace(":", "").replace("T", ""))
        set_if_unknown(state, "fault_domain", "FAULT-DOMAIN-1")
        set_if_unknown(state, "is_pv_encryption_in_transit_enabled", False)
        state["region"] = cloud.region
        state["boot_volume_id"] = ocid(cloud, "bootvolume")
        state["launch_mode"] = "PARAVIRTUALIZED"
        state["is_cross_numa_node"] = False
        state["time_created"] = cloud.now()
        shape_config = first(state.get("shape_config"))
        if shape_config:
            ocpus = shape_config.get("ocpus")
            ocpus = ocpus if isinstance(ocpus, (int, float)) else 1
            set_if_unknown(shape_config, "ocpus", ocpus)
            set_if_unknown(shape_config, "memory_in_gbs", ocpus * 16)
            set_if_unknown(shape_config, "vcpus", int(ocpus * 2))
            set_if_unknown(shape_config, "baseline_ocpu_utilization", "BASELINE_1_1")
            shape_config["processor_description"] = "fake processor"
            shape_config["max_vnic_attachments"] = 2
            shape_config["networking_bandwidth_in_gbps"] = ocpus
            shape_config["gpus"] = 0
            shape_config["local_disks"] = 0
        source = first(state.get("source_details"))
        if source:
            set_if_unknown(source, "boot_volume_size_in_gbs", "50")
            set_if_unknown(source, "boot_volume_vpus_per_gb", "10")

    def refill(self, cloud, prior, state, config):
        for name in ("private_ip", "public_ip", "boot_volume_id", "time_created", "region"):
            state[name] = prior.get(name)

    def boot(self, state, config):
        return {"user_data": (state.get("metadata") or {}).get("user_data")}


class SecurityGroup(Kind):
    """oci_core_network_security_group."""

    def new_id(self, cloud, state):
        return ocid(cloud, "networksecuritygroup")

    def fill(self, cloud, state, config):
        set_if_unknown(state, "display_name", "networksecuritygroup" + str(cloud.number()))
        state["state"] = "AVAILABLE"
        state["time_created"] = cloud.now()


class SecurityRule(Kind):
    """oci_core_network_security_group_security_rule: its id is a short hex, as OCI's are."""

    def new_id(self, cloud, state):
        return f"{cloud.number():06X}"

    def fill(self, cloud, state, config):
        if state.get("destination") is not None:
            set_if_unknown(state, "destination_type", "CIDR_BLOCK")
        if state.get("source") is not None:
            set_if_unknown(state, "source_type", "CIDR_BLOCK")
        set_if_unknown(state, "stateless", False)
        state["is_valid"] = True
        state["time_created"] = cloud.now()


class LoadBalancer(Kind):
    """oci_network_load_balancer_network_load_balancer: one address from the network."""

    def new_id(self, cloud, state):
        return ocid(cloud, "networkloadbalancer")

    def fill(self, cloud, state, config):
        set_if_unknown(state, "is_private", False)
        set_if_unknown(state, "is_preserve_source_destination", False)
        set_if_unknown(state, "is_symmetric_hash_enabled", False)
        set_if_unknown(state, "nlb_ip_version", "IPV4")
        address = state.get("assigned_private_ipv4") or cloud.address()
        state["ip_addresses"] = [
            {"ip_address": address, "ip_version": "IPV4", "is_public": not state["is_private"], "reserved_ip": []}
        ]
        state["state"] = "ACTIVE"
        state["time_created"] = cloud.now()
        state["time_updated"] = state["time_created"]

    def refill(self, cloud, prior, state, config):
        state["ip_addresses"] = prior.get("ip_addresses")


class BackendSet(Kind):
    """oci_network_load_balancer_backend_set: its id is networkLoadBalancers/<id>/backendSets/<name>."""

    def new_id(self, cloud, state):
        return f"networkLoadBalancers/{quote(state['network_load_balancer_id'], safe='')}/backendSets/{quote(state['name'], safe='')}"

    def fill(self, cloud, state, config):
        set_if_unknown(state, "ip_version", "IPV4")
        set_if_unknown(state, "is_preserve_source", False)
        checker = first(state.get("health_checker"))
        for name, value in (("interval_in_millis", 10000), ("retries", 3), ("timeout_in_millis", 3000), ("port", 0)):
            set_if_unknown(checker, name, value)
        if checker.get("protocol") in ("HTTP", "HTTPS"):
            set_if_unknown(checker, "url_path", "/")
            set_if_unknown(checker, "return_code", 200)
        state["backends"] = []


class Listener(Kind):
    """oci_network_load_balancer_listener: its id is networkLoadBalancers/<id>/listeners/<name>."""

    def new_id(self, cloud, state):
        return f"networkLoadBalancers/{quote(state['network_load_balancer_id'], safe='')}/listeners/{quote(state['name'], safe='')}"

    def fill(self, cloud, state, config):
        set_if_unknown(state, "ip_version", "IPV4")


class Backend(Kind):
    """oci_network_load_balancer_backend: named <ip>:<port>, or <target>.<port>, unless named."""

    def new_id(self, cloud, state):
        name = state.get("name")
        if not isinstance(name, str):
            target = state.get("target_id")
            if isinstance(target, str):
                name = f"{target}.{state['port']}"
            else:
                name = f"{state.get('ip_address')}:{state['port']}"
        state["name"] = name
        return (
            f"networkLoadBalancers/{quote(state['network_load_balancer_id'], safe='')}"
            f"/backendSets/{quote(state['backend_set_name'], safe='')}/backends/{name}"
        )

    def check(self, cloud, state, config):
        if not isinstance(state.get("target_id"), str) and not isinstance(state.get("ip_address"), str):
            raise Refusal("400-InvalidParameter, a backend needs an ipAddress or a targetId")

    def fill(self, cloud, state, config):
        target = state.get("target_id")
        if isinstance(target, str):
            instance = cloud.record.read("oci_core_instance", target)
            set_if_unknown(state, "ip_address", instance["attributes"]["private_ip"] if instance else None)
        for name, value in (("is_backup", False), ("is_drain", False), ("is_offline", False), ("weight", 1)):
            set_if_unknown(state, name, value)


def availability_domains(cloud: Cloud, config: dict) -> dict:
    region = (cloud.region or "fake-region-1").upper()
    domains = [
        {"compartment_id": config["compartment_id"], "id": f"ocid1.availabilitydomain.oc1..{n}", "name": f"XXXX:{region}-AD-{n}"}
        for n in (1, 2, 3)
    ]
    return {"id": f"IdentityAvailabilityDomainsDataSource-{config['compartment_id']}", "availability_domains": domains}


def subnet(cloud: Cloud, config: dict) -> dict:
    network = cloud.record.network
    return {
        "id": config["subnet_id"],
        "vcn_id": "ocid1.vcn.oc1..fake",
        "cidr_block": str(network),
        "virtual_router_ip": str(network.network_address + 1),
        "display_name": "fake-subnet",
        "state": "AVAILABLE",
        "prohibit_public_ip_on_vnic": False,
        "prohibit_internet_ingress": False,
    }


def image_shapes(cloud: Cloud, config: dict) -> dict:
    """Which shapes an image boots on: an arm64 image on Ampere shapes only, any other on the rest."""
    image = config["image_id"]
    arm = "arm64" in image or "aarch64" in image
    shapes = [shape for shape in SHAPES if any(marker in shape for marker in AMPERE) == arm]
    compatible = [{"image_id": image, "shape": shape, "memory_constraints": [], "ocpu_constraints": []} for shape in shapes]
    return {"id": f"CoreImageShapesDataSource-{image}", "image_shape_compatibilities": compatible}


RESOURCES = {
    "oci_core_instance": Instance(),
    "oci_core_network_security_group": SecurityGroup(),
    "oci_core_network_security_group_security_rule": SecurityRule(),
    "oci_network_load_balancer_network_load_balancer": LoadBalancer(),
    "oci_network_load_balancer_backend_set": BackendSet(),
    "oci_network_load_balancer_listener": Listener(),
    "oci_network_load_balancer_backend": Backend(),
}
DATA_SOURCES = {
    "oci_identity_availability_domains": availability_domains,
    "oci_core_subnet": subnet,
    "oci_core_image_shapes": image_shapes,
}
