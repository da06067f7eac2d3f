#!/usr/bin/env bash
# Proves the fake providers against the real engine, one workspace per provider:
#   init from a plugin directory (plugin_dir.py), apply, check the cloud record; change one
#   force-new attribute and see that resource alone planned ["delete","create"] (the JSON plan of
#   `show -json`), then applied; change the user data that lifecycle.ignore_changes keeps and see
#   no change; see the cloud's refusals; destroy and see the record empty.
# Needs the engine (`bash .ci/tofu-engine`) and the fake providers' python
# (CMS_TEST_FAKE_CLOUD_PYTHON, else `bash .ci/fake-providers`). Prints its time; exits non-zero
# on the first failed check.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
started=$SECONDS
tofu=${CMS_TEST_TOFU:-$(bash "$root/.ci/tofu-engine")}
python=${CMS_TEST_FAKE_CLOUD_PYTHON:-$(bash "$root/.ci/fake-providers")}
# The engine's empty CLI configuration: no provider_installation that -plugin-dir would miss.
export TF_CLI_CONFIG_FILE="$(dirname "$(dirname "$tofu")")/empty.tfrc"
export TF_IN_AUTOMATION=1
# The engine asks HashiCorp's checkpoint service for news unless told not to; no network here.
export CHECKPOINT_DISABLE=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
network=127.77.0.0/24
checks=0

fail() { echo "FAILED: $*" >&2; exit 1; }
pass() { checks=$((checks + 1)); echo "ok: $*"; }
run() { "$tofu" "$1" -input=false -no-color "${@:2}" >"$work/last.log" 2>&1 || { cat "$work/last.log" >&2; fail "tofu $*"; }; }
# A python check over the record: $1 the record directory, the program on stdin, more args after.
check() { "$python" - "$@" || fail "record check"; }

# The one resource that a plan replaces, and nothing else changes.
expect_only_replaced() {
    local dir=$1 address=$2
    shift 2
    (cd "$dir" && run plan -out=plan.bin "$@")
    (cd "$dir" && "$tofu" show -json plan.bin) >"$work/plan.json"
    "$python" - "$work/plan.json" "$address" <<'PY' || fail "plan of $address"
import json, sys
plan = json.load(open(sys.argv[1]))
changed = [(c["address"], c["change"]["actions"]) for c in plan["resource_changes"]
           if c["mode"] == "managed" and c["change"]["actions"] != ["no-op"]]
assert changed == [(sys.argv[2], ["delete", "create"])], changed
PY
    pass "a force-new change replaces $address alone: [\"delete\",\"create\"]"
    (cd "$dir" && run apply plan.bin)
}

expect_no_change() {
    local dir=$1 what=$2
    shift 2
    local code=0
    (cd "$dir" && "$tofu" plan -detailed-exitcode -input=false -no-color "$@" >"$work/last.log" 2>&1) || code=$?
    [ "$code" -eq 0 ] || { cat "$work/last.log" >&2; fail "$what: plan exit code $code"; }
    pass "$what: no change"
}

expect_refusal() {
    local dir=$1 message=$2
    shift 2
    if (cd "$dir" && "$tofu" apply -auto-approve -input=false -no-color "$@" >"$work/last.log" 2>&1); then
        fail "apply succeeded where the cloud refuses: $message"
    fi
    grep -q "$message" "$work/last.log" || { cat "$work/last.log" >&2; fail "no \"$message\" in the error"; }
    pass "refused: $message"
}

# A workspace: its plugin directory, record and main.tf.json (on stdin).
workspace() {
    local name=$1
    mkdir -p "$work/$name/ws"
    "$python" "$here/plugin_dir.py" "$work/$name/plugins" --record "$work/$name/record" --network "$network" \
        --python "$python" >/dev/null
    cat >"$work/$name/ws/main.tf.json"
    (cd "$work/$name/ws" && run init -plugin-dir="$work/$name/plugins")
}

record_is_empty() {
    check "$1" <<'PY'
import json, pathlib, sys
record = pathlib.Path(sys.argv[1])
left = sorted(str(p.relative_to(record)) for p in (record / "resources").rglob("*") if p.is_file())
assert left == [], left
events = [json.loads(line) for line in open(record / "events.jsonl")]
created = {e["id"] for e in events if e["op"] == "create"}
deleted = {e["id"] for e in events if e["op"] == "delete"}
assert created == deleted, created ^ deleted
PY
    pass "$2: destroy leaves the record empty"
}

echo "==> oci"
workspace oci <"$here/selftest/oci.tf.json"
oci=$work/oci
(cd "$oci/ws" && run apply -auto-approve -var user_data=first)
check "$oci/record" "$network" <<'PY'
import base64, ipaddress, json, pathlib, sys
record, network = pathlib.Path(sys.argv[1]), ipaddress.ip_network(sys.argv[2])
def entries(kind): return [json.loads(p.read_text()) for p in (record / "resources" / kind).glob("*.json")]
counts = {"oci_core_instance": 2, "oci_core_network_security_group": 1, "oci_core_network_security_group_security_rule": 1,
          "oci_network_load_balancer_network_load_balancer": 1, "oci_network_load_balancer_backend_set": 1,
          "oci_network_load_balancer_listener": 1, "oci_network_load_balancer_backend": 1}
for kind, count in counts.items():
    assert len(entries(kind)) == count, (kind, entries(kind))
instances = {e["attributes"]["display_name"]: e for e in entries("oci_core_instance")}
for entry in instances.values():
    assert entry["boot"]["user_data"] == base64.b64encode(b"first").decode(), entry["boot"]
    assert entry["attributes"]["state"] == "RUNNING" and entry["id"].startswith("ocid1.instance.oc1..")
assert instances["selftest-cp"]["attributes"]["public_ip"] is None
assert instances["selftest-worker"]["attributes"]["public_ip"] is not None
nlb = entries("oci_network_load_balancer_network_load_balancer")[0]["attributes"]
backend = entries("oci_network_load_balancer_backend")[0]["attributes"]
assert backend["ip_address"] == instances["selftest-cp"]["attributes"]["private_ip"], backend
addresses = [i["attributes"]["private_ip"] for i in instances.values()] + [instances["selftest-worker"]["attributes"]["public_ip"]]
addresses += [a["ip_address"] for a in nlb["ip_addresses"]]
assert len(set(addresses)) == len(addresses) and all(ipaddress.ip_address(a) in network for a in addresses), addresses
events = [json.loads(line) for line in open(record / "events.jsonl")]
assert sorted(e["op"] for e in events) == ["create"] * 8, events
assert {e["name"] for e in events if e["type"] == "oci_core_instance"} == {"selftest-cp", "selftest-worker"}
PY
pass "oci: the record holds the 8 resources, their addresses and the instances' boot user data"
outputs=$(cd "$oci/ws" && "$tofu" output -json)
"$python" - "$outputs" <<'PY' || fail "oci data sources"
import json, sys
out = {k: v["value"] for k, v in json.loads(sys.argv[1]).items()}
assert out["arm_shapes"] and all(any(m in s for m in (".A1.", ".A2.", ".A4.")) for s in out["arm_shapes"]), out
assert out["amd_shapes"] and not any(any(m in s for m in (".A1.", ".A2.", ".A4.")) for s in out["amd_shapes"]), out
assert out["domain"] == "XXXX:EU-FRANKFURT-1-AD-1" and out["vcn"] == "ocid1.vcn.oc1..fake", out
PY
pass "oci: availability domains, subnet and image shapes (arm64 on Ampere only)"
expect_only_replaced "$oci/ws" oci_core_instance.worker -var user_data=first -var worker_ad=1
check "$oci/record" <<'PY'
import json, pathlib, sys
events = [json.loads(line) for line in open(pathlib.Path(sys.argv[1]) / "events.jsonl")]
assert [(e["op"], e["name"]) for e in events[-2:]] == [("delete", "selftest-worker"), ("create", "selftest-worker")], events
PY
pass "oci: the replacement is recorded as a delete then a create"
expect_no_change "$oci/ws" "oci: new user data under ignore_changes" -var user_data=second -var worker_ad=1
(cd "$oci/ws" && run apply -auto-approve -var user_data=first -var worker_ad=1 -var nsg_name=selftest-renamed)
check "$oci/record" <<'PY'
import json, pathlib, sys
record = pathlib.Path(sys.argv[1])
last = [json.loads(line) for line in open(record / "events.jsonl")][-1]
assert (last["op"], last["type"], last["name"]) == ("update", "oci_core_network_security_group", "selftest-renamed"), last
entry = json.loads((record / "resources" / last["type"] / (last["id"] + ".json")).read_text())
assert entry["attributes"]["display_name"] == "selftest-renamed", entry
PY
pass "oci: an update in place is recorded as an update"
expect_refusal "$oci/ws" "is not a flexible shape" -var user_data=first -var worker_ad=1 -var worker_shape=VM.Standard2.1
expect_refusal "$oci/ws" "shapeConfig.ocpus is required" -var user_data=first -var worker_ad=1 -var extra_instance=1 -var extra_ocpus=0
expect_refusal "$oci/ws" "the limit is 32000 bytes" -var "user_data=$(head -c 24000 /dev/zero | tr '\0' x)" \
    -var worker_ad=1 -var extra_instance=1
(cd "$oci/ws" && run destroy -auto-approve -var user_data=first -var worker_ad=1)
record_is_empty "$oci/record" oci

echo "==> openstack"
workspace openstack <"$here/selftest/openstack.tf.json"
os=$work/openstack
(cd "$os/ws" && run apply -auto-approve -var user_data=first)
check "$os/record" "$network" <<'PY'
import hashlib, ipaddress, json, pathlib, sys
record, network = pathlib.Path(sys.argv[1]), ipaddress.ip_network(sys.argv[2])
def entries(kind): return [json.loads(p.read_text()) for p in (record / "resources" / kind).glob("*.json")]
kinds = ["openstack_compute_instance_v2"] * 2 + ["openstack_networking_secgroup_v2", "openstack_networking_secgroup_rule_v2",
         "openstack_lb_loadbalancer_v2", "openstack_lb_listener_v2", "openstack_lb_pool_v2", "openstack_lb_member_v2",
         "openstack_lb_monitor_v2", "openstack_networking_floatingip_v2", "openstack_networking_floatingip_associate_v2"]
for kind in set(kinds):
    assert len(entries(kind)) == kinds.count(kind), (kind, entries(kind))
for entry in entries("openstack_compute_instance_v2"):
    assert entry["boot"]["user_data"] == "first", entry["boot"]
    assert entry["attributes"]["user_data"] == hashlib.sha1(b"first").hexdigest(), entry["attributes"]["user_data"]
    assert entry["attributes"]["access_ip_v4"] == entry["attributes"]["network"][0]["fixed_ip_v4"]
lb = entries("openstack_lb_loadbalancer_v2")[0]["attributes"]
fip = entries("openstack_networking_floatingip_v2")[0]
association = entries("openstack_networking_floatingip_associate_v2")[0]
assert association["id"] == fip["id"] and association["attributes"]["port_id"] == lb["vip_port_id"]
member = entries("openstack_lb_member_v2")[0]["attributes"]
cp = [e for e in entries("openstack_compute_instance_v2") if e["attributes"]["name"] == "selftest-cp"][0]
assert member["address"] == cp["attributes"]["access_ip_v4"]
addresses = [e["attributes"]["access_ip_v4"] for e in entries("openstack_compute_instance_v2")]
addresses += [lb["vip_address"], fip["attributes"]["address"]]
assert len(set(addresses)) == len(addresses) and all(ipaddress.ip_address(a) in network for a in addresses), addresses
events = [json.loads(line) for line in open(record / "events.jsonl")]
assert sorted(e["op"] for e in events) == ["create"] * len(kinds), events
PY
pass "openstack: the record holds the 11 resources, their addresses and the instances' boot user data"
expect_only_replaced "$os/ws" openstack_compute_instance_v2.worker -var user_data=first -var worker_key=two
expect_no_change "$os/ws" "openstack: new user data under ignore_changes" -var user_data=second -var worker_key=two
expect_refusal "$os/ws" "User data too large" -var user_data=first -var worker_key=two \
    -var "extra_user_data=$(head -c 50000 /dev/zero | tr '\0' x)"
(cd "$os/ws" && run destroy -auto-approve -var user_data=first -var worker_key=two)
record_is_empty "$os/record" openstack

echo "$checks passed, 0 failed"
echo "selftest took $((SECONDS - started))s"
