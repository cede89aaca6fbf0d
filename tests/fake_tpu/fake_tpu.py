#!/usr/bin/env python3
"""A fake Cloud TPU v2 REST API for tests, spoken to by the real gcloud CLI.

Point gcloud at it with `gcloud config set api_endpoint_overrides/tpu http://127.0.0.1:PORT/`
(see gcloud_env.sh). Standard library only.

Implemented (v2 and v2alpha1 paths, same behaviour):
  nodes:            create (POST .../nodes?nodeId=N), get, list, delete, :start, :stop,
                    patch (PATCH .../nodes/N?updateMask=F1,F2: an "update" operation that sets
                    those top-level fields, e.g. metadata; `gcloud ... tpu-vm ssh` adds its key
                    to metadata["ssh-keys"] this way), :getGuestAttributes (honours workerIds;
                    a worker's ssh-ed25519 host key when one was given by /_control/workers)
  operations:       get (a create/delete/start/stop operation is done on its first poll, or
                    after --polls-until-done polls; a GET or list of its node counts as a poll,
                    so `--async` creates still reach READY), list
  queuedResources:  create (POST .../queuedResources?queuedResourceId=Q), get, list, delete
                    (?force=true also deletes its nodes)
Compute Engine API (only what `gcloud compute tpus tpu-vm ssh` reads; point it here with
`api_endpoint_overrides/compute http://127.0.0.1:PORT/`, which gcloud_env.sh sets):
  GET /compute/{v1,beta,alpha}/projects/P   the project, commonInstanceMetadata without items
                                            (so no OS Login and no project-wide ssh-keys)
Test-only control endpoints (not part of the real API), JSON bodies:
  POST /_control/no_capacity {"zone": Z}  creates in Z fail like a stockout: the operation
                                          finishes with error {code: 8, message: "There is no
                                          more capacity in the zone ..."}; queued resources in
                                          Z wait in WAITING_FOR_RESOURCES
  POST /_control/capacity {"zone": Z}     undoes no_capacity; waiting queued resources in Z get
                                          their nodes (READY) and become ACTIVE
  POST /_control/preempt {"zone": Z, "node": N}   node state PREEMPTED (its queued resource,
                                          if any, SUSPENDED)
  POST /_control/set_state {"zone": Z, "node": N, "state": S}   any node state
  POST /_control/worker_ips {"ips": [..]} the next workers created get these ipAddresses, in
                                          order (afterwards 10.130.0.2, .3, ...)
  POST /_control/workers {"zone": Z, "node": N, "workers": [{"ip": IP, "host_key": "ssh-ed25519
        AAAA..", "authorized_keys": PATH, "netns": NS, "keep_pid_file": FILE}, ..]}   an
        existing node's workers become these (networkEndpoints ipAddress and
        accessConfig.externalIp = IP). Whenever the node's metadata "ssh-keys" changes (and
        now), the fake plays the guest agent: each worker's PATH (with %u replaced by the user
        name, as sshd's AuthorizedKeysFile %u) is rewritten with that user's keys from
        "USER:KEY" lines (keys whose google-ssh expireOn is past are left out). Only ip is
        required. With netns, the fake plays the machine going away when the node becomes
        PREEMPTED or TERMINATED (/_control/preempt, /_control/set_state) or is deleted (a node
        DELETE, or a queued resource DELETE ?force=true that takes it): before answering that
        request it SIGKILLs every process in network namespace NS (`ip netns pids NS`, repeated
        until none is left) except the pid in FILE (the worker's sshd listener, so the worker
        can serve the next node mapped to it), and waits until they are gone.
  POST /_control/worker_template {"workers": [..as above..]}   every node that becomes READY
        afterwards (create, queued resource provisioning) with that many workers gets this
        mapping, exactly as if /_control/workers had been given it at that moment (so whoever
        first sees the node READY sees the workers' ips and host keys). {"workers": []} clears
        it. Nodes with another worker count get the usual made-up ips.
  GET  /_control/killed                   what the fake killed, in order: [{"node": N, "zone":
                                          Z, "netns": NS, "pids": [..]}], one entry per worker
                                          netns each time a node's machine went away (pids may
                                          be empty; "error" when `ip netns pids` failed)
  GET  /_control/requests                 every API request received (TPU and Compute), in
                                          order: [{method, path, query: {k: v}, body}]
  POST /_control/clear_requests
  GET  /_control/nodes                    every node, with its zone and project

Run: fake_tpu.py --port 0 --port-file FILE   (FILE gets the port once listening; SIGTERM stops)
"""

import argparse
import datetime
import http.server
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import threading
import urllib.parse
import zlib

LOCK = threading.Lock()
NODES = {}  # (project, zone, name) -> node dict
QUEUED = {}  # (project, zone, id) -> queued resource dict
OPS = {}  # op name -> {"op": dict, "polls_left": int, "finish": callable or None}
NO_CAPACITY = set()
REQUESTS = []
NEXT_IPS = []
WORKERS = {}  # (project, zone, name) -> [{"ip", "host_key", "authorized_keys", "netns",
#               "keep_pid_file"}] from /_control/workers or /_control/worker_template
TEMPLATE = []  # /_control/worker_template: the workers of the next READY nodes of that size
KILLED = []  # [{"node", "zone", "netns", "pids"}]: see /_control/killed
WRITTEN_KEYS = {}  # authorized_keys path written -> ((project, zone, name), path template)
OP_COUNTER = itertools.count(1)
IP_COUNTER = itertools.count(0)
ID_COUNTER = itertools.count(1000000000000000001)
POLLS_UNTIL_DONE = 1

PORT_NUMBER = 8470
COMPUTE_PROJECT = re.compile(r"^/compute/(v1|beta|alpha)/projects/([^/]+)$")
ROUTE = re.compile(r"^/(v2|v2alpha1)/projects/([^/]+)/locations/([^/]+)(?:/([A-Za-z]+)(?:/([^/:]+))?(?::([a-zA-Z]+))?)?$")


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def error_body(code, status, message):
    return {"error": {"code": code, "message": message, "status": status}}


def stockout_message(zone):
    return ('There is no more capacity in the zone "%s"; you can try in another zone where '
            "Cloud TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions) "
            "[EID: 0x1fa4e7c0ffee]" % zone)


def worker_count(accelerator_type):
    """Hosts in a slice: v2/v3/v4/v5p count TensorCores, 8 per host; v5e/v6e count chips, a
    slice of up to 8 chips is one host, larger ones have 4 chips per host."""
    m = re.match(r"^(v\d+[a-z]*|v5litepod)-(\d+)$", accelerator_type or "")
    if not m:
        return 1
    family, n = m.group(1), int(m.group(2))
    if family in ("v5litepod", "v5e", "v6e"):
        return 1 if n <= 8 else n // 4
    return max(1, n // 8)


def accelerator_config(accelerator_type):
    """The acceleratorConfig the API reports for an acceleratorType such as v4-32."""
    m = re.match(r"^(v\d+[a-z]*|v5litepod)-(\d+)$", accelerator_type or "")
    if not m:
        return None
    family, n = m.group(1), int(m.group(2))
    if family in ("v5litepod", "v5e", "v6e"):
        shapes = {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16",
                  256: "16x16"}
        return {"type": "V6E" if family == "v6e" else "V5LITE_POD",
                "topology": shapes.get(n, "%dx1" % n)}
    chips = max(1, n // 2)
    return {"type": family.upper(), "topology": "2x2x%d" % max(1, chips // 4)}


def next_ip():
    if NEXT_IPS:
        return NEXT_IPS.pop(0)
    n = next(IP_COUNTER)
    return "10.130.%d.%d" % (n // 250, n % 250 + 2)


def new_operation(version, project, zone, target, verb, finish):
    name = "projects/%s/locations/%s/operations/operation-%d" % (project, zone, next(OP_COUNTER))
    op = {
        "name": name,
        "metadata": {
            "@type": "type.googleapis.com/google.cloud.tpu.%s.OperationMetadata" % version,
            "createTime": now(),
            "target": target,
            "verb": verb,
            "cancelRequested": False,
            "apiVersion": version,
        },
        "done": False,
    }
    OPS[name] = {"op": op, "polls_left": POLLS_UNTIL_DONE, "finish": finish}
    if POLLS_UNTIL_DONE <= 0:
        complete(OPS[name])
    return op


def complete(entry):
    op = entry["op"]
    if op["done"]:
        return
    result = entry["finish"]() if entry["finish"] else {}
    op["done"] = True
    op["metadata"]["endTime"] = now()
    if "error" in result:
        op["error"] = result["error"]
    else:
        op["response"] = result.get("response", {
            "@type": "type.googleapis.com/google.protobuf.Empty"})


def poll(entry):
    if not entry["op"]["done"]:
        entry["polls_left"] -= 1
        if entry["polls_left"] <= 0:
            complete(entry)


def poll_targets(project, zone, collection, ident):
    """With --async nobody polls the operation: looking at its target counts as a poll."""
    for entry in list(OPS.values()):
        parts = entry["op"]["metadata"]["target"].split("/")
        if (not entry["op"]["done"] and len(parts) == 6 and parts[4] == collection
                and parts[1] == project and zone in ("-", parts[3])
                and ident in (None, parts[5])):
            poll(entry)


def typed(version, kind, obj):
    out = {"@type": "type.googleapis.com/google.cloud.tpu.%s.%s" % (version, kind)}
    out.update(obj)
    return out


def make_node(project, zone, name, body, queued_resource=None):
    node = dict(body)
    node["name"] = "projects/%s/locations/%s/nodes/%s" % (project, zone, name)
    node["state"] = "CREATING"
    node["createTime"] = now()
    node["id"] = str(next(ID_COUNTER))
    node["apiVersion"] = "V2"
    if "acceleratorConfig" not in node and accelerator_config(node.get("acceleratorType")):
        node["acceleratorConfig"] = accelerator_config(node.get("acceleratorType"))
    node.setdefault("networkConfig", {"network": "projects/%s/global/networks/default" % project,
                                      "subnetwork": "projects/%s/regions/%s/subnetworks/default"
                                      % (project, zone.rsplit("-", 1)[0]),
                                      "enableExternalIps": True})
    node.setdefault("serviceAccount", {"email": "%s-compute@developer.gserviceaccount.com" % project,
                                       "scope": ["https://www.googleapis.com/auth/cloud-platform"]})
    node.setdefault("schedulingConfig", {})
    if queued_resource:
        node["queuedResource"] = queued_resource
    node["networkEndpoints"] = []
    node["symptoms"] = []
    return node


def make_ready(node):
    if not node["networkEndpoints"]:
        for key, n in NODES.items():
            if n is node:
                if (key not in WORKERS and TEMPLATE
                        and len(TEMPLATE) == worker_count(node.get("acceleratorType"))):
                    WORKERS[key] = [dict(w) for w in TEMPLATE]
                    apply_workers(key)
                    sync_authorized_keys(key)
                else:
                    apply_workers(key)
    if not node["networkEndpoints"]:
        for _ in range(worker_count(node.get("acceleratorType"))):
            ip = next_ip()
            endpoint = {"ipAddress": ip, "port": PORT_NUMBER}
            if node.get("networkConfig", {}).get("enableExternalIps", True):
                endpoint["accessConfig"] = {"externalIp": ip}
            node["networkEndpoints"].append(endpoint)
    node["state"] = "READY"
    node["health"] = "HEALTHY"


def parse_ssh_keys(value):
    """{user: [key lines]} from a metadata ssh-keys value ("USER:TYPE KEY [COMMENT]" lines), the
    way the guest agent reads it: blank and malformed lines, and keys whose google-ssh expireOn
    has passed, are skipped."""
    keys = {}
    for line in (value or "").splitlines():
        user, sep, key = line.strip().partition(":")
        if not sep or not user or not key.strip():
            continue
        m = re.search(r"google-ssh (\{.*\})\s*$", key)
        if m:
            try:
                expire = json.loads(m.group(1)).get("expireOn")
                when = datetime.datetime.strptime(expire[:19], "%Y-%m-%dT%H:%M:%S").replace(
                    tzinfo=datetime.timezone.utc) if expire else None
            except (ValueError, TypeError, AttributeError):
                when = None
            if when and when < datetime.datetime.now(datetime.timezone.utc):
                continue
        keys.setdefault(user, []).append(key.strip())
    return keys


def sync_authorized_keys(key):
    """Plays the guest agent for a node mapped by /_control/workers: rewrites each worker's
    authorized_keys file(s) from the node's metadata ssh-keys."""
    node = NODES.get(key)
    workers = WORKERS.get(key)
    if not node or not workers:
        return
    by_user = parse_ssh_keys((node.get("metadata") or {}).get("ssh-keys"))
    for worker in workers:
        template = worker.get("authorized_keys")
        if not template:
            continue
        paths = {}
        if "%u" in template:
            for path, owner in WRITTEN_KEYS.items():  # users whose keys went away: emptied
                if owner == (key, template):
                    paths[path] = []
            for user, lines in by_user.items():
                paths[template.replace("%u", user)] = lines
        else:
            paths[template] = [line for lines in by_user.values() for line in lines]
        for path, lines in paths.items():
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write("".join(line + "\n" for line in lines))
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
            WRITTEN_KEYS[path] = (key, template)


def apply_workers(key):
    """Gives a node the networkEndpoints of its /_control/workers mapping, if it has one."""
    node = NODES.get(key)
    workers = WORKERS.get(key)
    if not node or not workers:
        return
    external = node.get("networkConfig", {}).get("enableExternalIps", True)
    node["networkEndpoints"] = []
    for worker in workers:
        endpoint = {"ipAddress": worker["ip"], "port": PORT_NUMBER}
        if external:
            endpoint["accessConfig"] = {"externalIp": worker["ip"]}
        node["networkEndpoints"].append(endpoint)


def valid_workers(workers):
    """None when a /_control/workers or worker_template list is well formed, else the problem."""
    if not isinstance(workers, list):
        return "workers must be a list"
    for w in workers:
        if not isinstance(w, dict) or not w.get("ip"):
            return "each worker needs an ip"
        for field in ("host_key", "authorized_keys", "netns", "keep_pid_file"):
            if w.get(field) is not None and not isinstance(w[field], str):
                return "worker %s must be a string" % field
    return None


def read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError, TypeError):
        return None


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def kill_netns(netns, keep):
    """SIGKILLs every process in network namespace netns but keep, until none is left (a process
    may fork while it is being killed). Returns (pids killed, error or None)."""
    ip = shutil.which("ip") or "/usr/sbin/ip"
    killed = []
    for _ in range(20):
        listed = subprocess.run([ip, "netns", "pids", netns], capture_output=True, text=True)
        if listed.returncode != 0:
            return killed, (listed.stderr.strip() or "ip netns pids failed")
        pids = [int(p) for p in listed.stdout.split() if p.isdigit()]
        pids = [p for p in pids if p not in (keep, os.getpid()) and alive(p)]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if pid not in killed:
                killed.append(pid)
        deadline = time.monotonic() + 5
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.01)
    return killed, None


def machine_gone(key):
    """Plays the VMs of a node going away (preempted, terminated, deleted): every process in its
    workers' network namespaces is killed, except each worker's keep_pid_file process."""
    for worker in WORKERS.get(key) or []:
        netns = worker.get("netns")
        if not netns:
            continue
        killed, error = kill_netns(netns, read_pid(worker.get("keep_pid_file")))
        entry = {"node": key[2], "zone": key[1], "netns": netns, "pids": killed}
        if error:
            entry["error"] = error
        KILLED.append(entry)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def send_json(self, code, obj):
        data = json.dumps(obj, indent=1).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def handle_any(self, method):
        url = urllib.parse.urlsplit(self.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        body = self.read_body()
        with LOCK:
            if url.path.startswith("/_control/"):
                code, obj = self.control(method, url.path[len("/_control/"):], body)
            else:
                REQUESTS.append({"method": method, "path": url.path, "query": query, "body": body})
                code, obj = self.api(method, url.path, query, body)
        self.send_json(code, obj)

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_DELETE(self):
        self.handle_any("DELETE")

    def do_PATCH(self):
        self.handle_any("PATCH")

    # ---- test control ----
    def control(self, method, what, body):
        body = body if isinstance(body, dict) else {}
        if what == "requests" and method == "GET":
            return 200, REQUESTS
        if what == "clear_requests":
            REQUESTS.clear()
            return 200, {}
        if what == "nodes":
            return 200, [dict(n, zone=k[1], project=k[0]) for k, n in NODES.items()]
        if what == "no_capacity":
            NO_CAPACITY.add(body["zone"])
            return 200, {}
        if what == "capacity":
            NO_CAPACITY.discard(body["zone"])
            for key, qr in QUEUED.items():
                if key[1] == body["zone"] and qr["state"]["state"] == "WAITING_FOR_RESOURCES":
                    provision_queued(key)
            return 200, {}
        if what == "worker_ips":
            NEXT_IPS[:] = list(body.get("ips", []))
            return 200, {}
        if what == "killed" and method == "GET":
            return 200, KILLED
        if what == "worker_template":
            workers = body.get("workers") or []
            problem = valid_workers(workers)
            if problem:
                return 400, error_body(400, "INVALID_ARGUMENT", problem)
            TEMPLATE[:] = [dict(w) for w in workers]
            return 200, {"workers": TEMPLATE}
        if what == "workers":
            found = [k for k in NODES if k[2] == body.get("node") and k[1] == body.get("zone")]
            if not found:
                return 404, error_body(404, "NOT_FOUND", "no such node")
            workers = body.get("workers") or []
            problem = valid_workers(workers)
            if problem:
                return 400, error_body(400, "INVALID_ARGUMENT", problem)
            key, = found
            WORKERS[key] = [dict(w) for w in workers]
            apply_workers(key)
            sync_authorized_keys(key)
            return 200, NODES[key]
        if what in ("preempt", "set_state"):
            found = [(k, n) for k, n in NODES.items()
                     if k[2] == body.get("node") and k[1] == body.get("zone")]
            if not found:
                return 404, error_body(404, "NOT_FOUND", "no such node")
            (key, node), = found
            node["state"] = body.get("state", "PREEMPTED")
            if node["state"] in ("PREEMPTED", "TERMINATED"):
                machine_gone(key)
            if node["state"] == "PREEMPTED":
                qr_name = node.get("queuedResource")
                for qr in QUEUED.values():
                    if qr["name"] == qr_name:
                        qr["state"] = {"state": "SUSPENDED", "stateInitiator": "SERVICE"}
            return 200, node
        return 404, error_body(404, "NOT_FOUND", "unknown control endpoint " + what)

    # ---- the API ----
    def api(self, method, path, query, body):
        m = COMPUTE_PROJECT.match(path)
        if m and method == "GET":
            version, project = m.groups()
            return 200, {"kind": "compute#project", "name": project,
                         "id": str(zlib.crc32(project.encode()) + 10**15),
                         "selfLink": "https://compute.googleapis.com/compute/%s/projects/%s"
                                     % (version, project),
                         "commonInstanceMetadata": {"kind": "compute#metadata",
                                                    "fingerprint": "ZmFrZS1mYWtlLWZhaw=="},
                         "defaultServiceAccount": "%s-compute@developer.gserviceaccount.com"
                                                  % project,
                         "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS"}
        m = ROUTE.match(path)
        if not m:
            return 404, error_body(404, "NOT_FOUND", "Requested entity was not found: " + path)
        version, project, zone, collection, ident, verb = m.groups()
        body = body if isinstance(body, dict) else {}
        if collection is None and method == "GET":
            return 200, {"name": "projects/%s/locations/%s" % (project, zone), "locationId": zone}
        if collection == "nodes":
            return self.nodes(version, project, zone, method, ident, verb, query, body)
        if collection == "operations":
            return self.operations(project, zone, method, ident)
        if collection == "queuedResources":
            return self.queued(version, project, zone, method, ident, query, body)
        if collection == "acceleratorTypes" and method == "GET":
            types = [{"name": "projects/%s/locations/%s/acceleratorTypes/%s" % (project, zone, t),
                      "type": t} for t in ("v4-8", "v4-16", "v4-32", "v4-64", "v5litepod-8",
                                          "v5litepod-16", "v5p-8", "v6e-8")]
            if ident:
                for t in types:
                    if t["type"] == ident:
                        return 200, t
                return 404, error_body(404, "NOT_FOUND", "Resource not found")
            return 200, {"acceleratorTypes": types}
        if collection == "runtimeVersions" and method == "GET":
            versions = [{"name": "projects/%s/locations/%s/runtimeVersions/%s" % (project, zone, v),
                         "version": v} for v in ("tpu-ubuntu2204-base", "v2-alpha-tpuv5-lite",
                                                "v2-alpha-tpuv6e")]
            return 200, {"runtimeVersions": versions}
        return 404, error_body(404, "NOT_FOUND", "Requested entity was not found.")

    def nodes(self, version, project, zone, method, ident, verb, query, body):
        if method == "GET" and verb is None:
            poll_targets(project, zone, "nodes", ident)
        if ident is None and method == "GET":
            nodes = [n for k, n in NODES.items() if k[0] == project and zone in ("-", k[1])]
            return 200, {"nodes": nodes} if nodes else {}
        if ident is None and method == "POST":
            name = query.get("nodeId", "")
            if not re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", name):
                return 400, error_body(400, "INVALID_ARGUMENT", "Invalid node id: %r" % name)
            key = (project, zone, name)
            if key in NODES:
                return 409, error_body(409, "ALREADY_EXISTS",
                                       "Resource 'projects/%s/locations/%s/nodes/%s' already exists"
                                       % key)
            if not body.get("acceleratorType") and not body.get("acceleratorConfig"):
                return 400, error_body(400, "INVALID_ARGUMENT", "acceleratorType is required")
            if not body.get("runtimeVersion"):
                return 400, error_body(400, "INVALID_ARGUMENT", "runtimeVersion is required")
            node = make_node(project, zone, name, body)
            NODES[key] = node

            def finish():
                if zone in NO_CAPACITY:
                    NODES.pop(key, None)
                    return {"error": {"code": 8, "message": stockout_message(zone)}}
                make_ready(node)
                return {"response": typed(version, "Node", node)}
            return 200, new_operation(version, project, zone, node["name"], "create", finish)
        key = (project, zone, ident)
        node = NODES.get(key)
        if node is None:
            return 404, error_body(404, "NOT_FOUND",
                                   "Resource 'projects/%s/locations/%s/nodes/%s' was not found" % key)
        if method == "GET" and verb is None:
            return 200, node
        if method == "DELETE" and verb is None:
            node["state"] = "DELETING"
            machine_gone(key)

            def finish_delete():
                NODES.pop(key, None)
                WORKERS.pop(key, None)
                return {}
            return 200, new_operation(version, project, zone, node["name"], "delete", finish_delete)
        if method == "POST" and verb in ("stop", "start"):
            node["state"] = "STOPPING" if verb == "stop" else "STARTING"

            def finish_verb():
                if verb == "stop":
                    node["state"] = "STOPPED"
                elif zone in NO_CAPACITY:
                    node["state"] = "STOPPED"
                    return {"error": {"code": 8, "message": stockout_message(zone)}}
                else:
                    make_ready(node)
                return {"response": typed(version, "Node", node)}
            return 200, new_operation(version, project, zone, node["name"], verb, finish_verb)
        if method == "POST" and verb == "getGuestAttributes":
            wanted = [w for w in body.get("workerIds") or [] if w != ""]
            mapped = WORKERS.get(key) or []
            attributes = []
            for i in range(len(node["networkEndpoints"])):
                if wanted and str(i) not in wanted:
                    continue
                items = []
                host_key = (mapped[i].get("host_key") or "") if i < len(mapped) else ""
                if host_key.startswith("ssh-ed25519 "):
                    items.append({"namespace": "hostkeys", "key": "ssh-ed25519",
                                  "value": host_key.split()[1]})
                attributes.append({"queryPath": body.get("queryPath", ""),
                                   "queryValue": {"items": items}, "workerId": str(i)})
            return 200, {"guestAttributes": attributes}
        if method == "PATCH" and verb is None:
            fields = [f for f in query.get("updateMask", "").split(",") if f]
            if not fields:
                return 400, error_body(400, "INVALID_ARGUMENT", "updateMask is required")
            settable = ("metadata", "labels", "tags", "description", "networkConfig",
                        "schedulingConfig", "shieldedInstanceConfig", "dataDisks")
            bad = [f for f in fields if f not in settable]
            if bad:
                return 400, error_body(400, "INVALID_ARGUMENT",
                                       "field(s) cannot be updated: %s" % ",".join(bad))

            def finish_update():
                for field in fields:
                    if field in body:
                        node[field] = body[field]
                    else:
                        node.pop(field, None)
                sync_authorized_keys(key)
                return {"response": typed(version, "Node", node)}
            return 200, new_operation(version, project, zone, node["name"], "update",
                                      finish_update)
        return 400, error_body(400, "INVALID_ARGUMENT", "unsupported %s %s" % (method, verb))

    def operations(self, project, zone, method, ident):
        if ident is None and method == "GET":
            ops = [e["op"] for e in OPS.values()
                   if e["op"]["name"].startswith("projects/%s/locations/%s/" % (project, zone))]
            return 200, {"operations": ops}
        name = "projects/%s/locations/%s/operations/%s" % (project, zone, ident)
        entry = OPS.get(name)
        if entry is None:
            return 404, error_body(404, "NOT_FOUND", "Operation %s was not found" % name)
        if method == "GET":
            poll(entry)
            return 200, entry["op"]
        return 400, error_body(400, "INVALID_ARGUMENT", "unsupported")

    def queued(self, version, project, zone, method, ident, query, body):
        if method == "GET":
            poll_targets(project, zone, "queuedResources", ident)
        if ident is None and method == "GET":
            qrs = [q for k, q in QUEUED.items() if k[0] == project and zone in ("-", k[1])]
            return 200, {"queuedResources": qrs} if qrs else {}
        if ident is None and method == "POST":
            qid = query.get("queuedResourceId", "")
            key = (project, zone, qid)
            if not qid or key in QUEUED:
                return 409, error_body(409, "ALREADY_EXISTS", "Resource already exists: " + qid)
            specs = (body.get("tpu") or {}).get("nodeSpec") or []
            if not specs:
                return 400, error_body(400, "INVALID_ARGUMENT", "tpu.nodeSpec is required")
            qr = dict(body)
            qr["name"] = "projects/%s/locations/%s/queuedResources/%s" % key
            qr["createTime"] = now()
            qr["state"] = {"state": "CREATING"}
            QUEUED[key] = qr

            def finish():
                qr["state"] = {"state": "ACCEPTED"}
                if zone in NO_CAPACITY:
                    qr["state"] = {"state": "WAITING_FOR_RESOURCES"}
                else:
                    provision_queued(key)
                return {"response": typed(version, "QueuedResource", qr)}
            return 200, new_operation(version, project, zone, qr["name"], "create", finish)
        key = (project, zone, ident)
        qr = QUEUED.get(key)
        if qr is None:
            return 404, error_body(404, "NOT_FOUND",
                                   "Resource 'projects/%s/locations/%s/queuedResources/%s' was not "
                                   "found" % key)
        if method == "GET":
            return 200, qr
        if method == "DELETE":
            owned = [k for k, n in NODES.items() if n.get("queuedResource") == qr["name"]]
            if owned and query.get("force", "").lower() != "true":
                return 400, error_body(400, "FAILED_PRECONDITION",
                                       "Cannot delete queued resource %s in state %s: it has nodes; "
                                       "delete them first or use --force"
                                       % (qr["name"], qr["state"]["state"]))
            qr["state"] = {"state": "DELETING"}
            for k in owned:
                machine_gone(k)

            def finish_delete():
                for k in owned:
                    NODES.pop(k, None)
                    WORKERS.pop(k, None)
                QUEUED.pop(key, None)
                return {}
            return 200, new_operation(version, project, zone, qr["name"], "delete", finish_delete)
        return 400, error_body(400, "INVALID_ARGUMENT", "unsupported")


def provision_queued(key):
    qr = QUEUED[key]
    for spec in qr["tpu"]["nodeSpec"]:
        parent = spec.get("parent", "projects/%s/locations/%s" % (key[0], key[1]))
        _, project, _, zone = parent.split("/")[:4]
        node_id = spec.get("nodeId") or key[2]
        node = make_node(project, zone, node_id, spec.get("node", {}), qr["name"])
        if "spot" in qr:
            node["schedulingConfig"] = dict(node["schedulingConfig"], spot=True)
        NODES[(project, zone, node_id)] = node
        make_ready(node)  # in NODES first: a worker template is applied by key
    qr["state"] = {"state": "ACTIVE"}


def main():
    global POLLS_UNTIL_DONE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", help="written with the port once the server listens")
    parser.add_argument("--polls-until-done", type=int, default=1,
                        help="operation GETs before an operation is done (0: done at once)")
    args = parser.parse_args()
    POLLS_UNTIL_DONE = args.polls_until_done
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % server.server_address[1])
        os.replace(tmp, args.port_file)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
