#!/usr/bin/env python3
"""A fake Kubernetes API server for tests, spoken to by the real kubectl.

usage: fake_k8s.py --port-file FILE [--port N]
                   [--kubelet-root DIR --image-path PATH=DIR ... --pod-local PATH ...]

Point kubectl at it with a kubeconfig whose cluster server is http://127.0.0.1:PORT
(tests/integration/fake_k8s.cc writes one). Standard library only. What it serves, as a cluster
with JobSet and Kueue installed would:

  discovery:    /version, /api, /apis (legacy APIGroupList), /api/v1, /apis/GROUP/VERSION
                for batch/v1, jobset.x-k8s.io/v1alpha2, kueue.x-k8s.io/v1beta1,
                authorization.k8s.io/v1; /openapi/v3 and each group version's document, as
                far as kubectl reads them to learn that the server validates fields (a PATCH
                operation per kind with the fieldValidation query parameter): kubectl then
                sends fieldValidation=Strict
  objects:      namespaced CRUD (create, get, list, replace, merge patch, delete) of secrets,
                pods, jobs, jobsets, workloads, localqueues; list with labelSelector (k=v,...)
  validation:   a JobSet or Secret with a field the API does not define, sent with
                fieldValidation=Strict (kubectl >= 1.27's default), is refused with the API
                server's strict-decoding answer (400 on create and update, 422 on patch);
                without it the field is dropped, as a real server drops it
  auth:         POST .../selfsubjectaccessreviews (JSON, or the Kubernetes protobuf kubectl
                sends) answers allowed unless the verb and resource were denied through
                /_control/deny

Test-only control endpoints (JSON bodies):
  POST /_control/deny {"verb": V, "resource": R}   `kubectl auth can-i V R` says no, and V on R
                                                   is refused with 403
  POST /_control/drop_group {"group": G}           the API group is gone from discovery, as in a
                                                   cluster without that CRD
  POST /_control/quota {"chips": N}                the google.com/tpu quota Kueue admits JobSets
                                                   into (default 0: every JobSet is held)
  POST /_control/evict {"namespace": NS, "jobset": NAME, "reason": R, "message": M}
                                                   Kueue evicts it (default reason Preempted):
                                                   suspended again, Evicted=True
Kueue, as far as the provider sees it: a JobSet labelled kueue.x-k8s.io/queue-name gets a
Workload (jobset-NAME-HASH, label kueue.x-k8s.io/job-uid, owned by the JobSet) with Kueue's
conditions: held (QuotaReserved=False, reason Pending, "couldn't assign flavors ...", or
Inadmissible when its LocalQueue does not exist) until its chips fit the quota, then admitted
(QuotaReserved and Admitted True, the JobSet unsuspended), in creation order.
  GET  /_control/requests                          every request so far: [{method, path}]

A kubelet, with --kubelet-root: an admitted (unsuspended) JobSet's pods run as local processes,
one per completion index of each replicated job (JOB_COMPLETION_INDEX set), the container's
command as given, after its init containers (each run to its end first; one that fails fails
the pod), with its paths mapped: each Secret volume's mountPath to a directory holding the
Secret's keys as files, each emptyDir's to a directory the pod's containers share, a volume a
container does not mount to nothing it can name, each --image-path PATH (a directory of the image) to DIR, and each
--pod-local PATH (the container's own filesystem, e.g. /var/tmp) to a directory of the pod's. A
pod's exit ends it Succeeded or Failed; a failed pod fails its JobSet (failurePolicy maxRestarts
0: condition Failed, reason FailedJobs) and its other pods are stopped; all succeeded: Completed.
A JobSet suspended again (evicted) or deleted has its pods stopped: SIGTERM, then SIGKILL after
5 s, as the kubelet's grace period.
  POST /_control/node_lost {"namespace": NS, "jobset": NAME}
                                                   the node under its pods is gone: their
                                                   processes are SIGKILLed at once, the pods
                                                   fail, and so does the JobSet
  POST /_control/fail_pods {"count": N}            the next N pods to start fail at once (exit 1,
                                                   as an image that cannot start)
  POST /_control/pull_fail {"count": N}            the next N pods stay Pending, their image not
                                                   pulled (waiting: ErrImagePull)
  GET  /_control/pods                              [{namespace, name, jobset, index, phase, pid}]
"""
import argparse
import json
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

GROUPS = {
    # group: (version, {plural: (kind, namespaced)})
    "batch": ("v1", {"jobs": ("Job", True)}),
    "jobset.x-k8s.io": ("v1alpha2", {"jobsets": ("JobSet", True)}),
    "kueue.x-k8s.io": ("v1beta1", {"workloads": ("Workload", True),
                                   "localqueues": ("LocalQueue", True),
                                   "clusterqueues": ("ClusterQueue", False)}),
    "authorization.k8s.io": ("v1", {"selfsubjectaccessreviews": ("SelfSubjectAccessReview", False)}),
}
CORE = {"secrets": ("Secret", True), "pods": ("Pod", True), "namespaces": ("Namespace", False)}

# The fields each kind's API defines, as far as TAE's manifests go (JobSet v1alpha2, core/v1,
# batch/v1); a field outside these is refused, as an API server with strict field validation
# refuses it. None: any content (free-form maps).
OBJECT_META = {"name": None, "namespace": None, "labels": None, "annotations": None,
               "uid": None, "resourceVersion": None, "creationTimestamp": None,
               "generation": None, "ownerReferences": None, "finalizers": None,
               "generateName": None, "managedFields": None}
CONTAINER = {"name": None, "image": None, "command": None, "args": None, "env": None,
             "resources": None, "volumeMounts": None, "ports": None, "securityContext": None,
             "workingDir": None, "imagePullPolicy": None}
POD_SPEC = {"restartPolicy": None, "nodeSelector": None, "containers": [CONTAINER],
            "initContainers": [CONTAINER], "automountServiceAccountToken": None,
            "volumes": None, "tolerations": None, "affinity": None, "subdomain": None,
            "hostname": None, "hostNetwork": None, "dnsPolicy": None,
            "serviceAccountName": None, "terminationGracePeriodSeconds": None,
            "priorityClassName": None}
POD_TEMPLATE = {"metadata": OBJECT_META, "spec": POD_SPEC}
JOB_SPEC = {"parallelism": None, "completions": None, "completionMode": None,
            "backoffLimit": None, "activeDeadlineSeconds": None, "ttlSecondsAfterFinished": None,
            "suspend": None, "template": POD_TEMPLATE, "podFailurePolicy": None}
JOBSET = {"apiVersion": None, "kind": None, "metadata": OBJECT_META, "status": None,
          "spec": {"replicatedJobs": [{"name": None, "replicas": None,
                                       "template": {"metadata": OBJECT_META, "spec": JOB_SPEC}}],
                   "network": None, "successPolicy": None,
                   "failurePolicy": {"maxRestarts": None, "rules": None,
                                     "restartStrategy": None},
                   "startupPolicy": None, "suspend": None, "coordinator": None,
                   "managedBy": None, "ttlSecondsAfterFinished": None}}
SECRET = {"apiVersion": None, "kind": None, "metadata": OBJECT_META, "type": None,
          "data": None, "stringData": None, "immutable": None}
SCHEMAS = {"JobSet": JOBSET, "Secret": SECRET}


def unknown_fields(obj, schema, path=""):
    """The dotted paths of obj's fields that schema does not define."""
    if schema is None:
        return []
    if isinstance(schema, list):
        out = []
        for i, item in enumerate(obj if isinstance(obj, list) else []):
            out += unknown_fields(item, schema[0], f"{path}[{i}]")
        return out
    if not isinstance(obj, dict):
        return []
    out = []
    for key, value in obj.items():
        where = f"{path}.{key}" if path else key
        if key not in schema:
            out.append(where)
        else:
            out += unknown_fields(value, schema[key], where)
    return out


class State:
    def __init__(self):
        self.kubelet_root = None  # set: the kubelet runs admitted JobSets' pods
        self.image_paths = {}     # image path -> local directory
        self.pod_local = []       # paths of the container's own filesystem
        self.pods = {}            # (namespace, pod name) -> Pod
        self.fail_next = 0
        self.pull_fail_next = 0
        self.lock = threading.Lock()
        self.objects = {}  # (plural, namespace, name) -> object
        self.version = 1
        self.denied = set()  # (verb, plural)
        self.requests = []
        self.tpu_quota = 0     # chips the ClusterQueue behind every LocalQueue may admit
        self.evicted = {}      # (namespace, jobset) -> (reason, message), until it is deleted


STATE = State()


def status(code, reason, message):
    return code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": message, "reason": reason, "code": code}


def condition(type_, status_, reason, message):
    return {"type": type_, "status": status_, "reason": reason, "message": message,
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def jobset_chips(jobset):
    """google.com/tpu over the JobSet's pods: replicas x min(parallelism, completions) each."""
    chips = 0
    for rj in jobset.get("spec", {}).get("replicatedJobs", []):
        job = rj.get("template", {}).get("spec", {})
        pods = rj.get("replicas", 1) * min(job.get("parallelism", 1), job.get("completions", 1))
        for c in job.get("template", {}).get("spec", {}).get("containers", []):
            chips += pods * int(c.get("resources", {}).get("limits", {}).get("google.com/tpu", 0))
    return chips


def kueue_reconcile():
    """What Kueue does for the JobSets labelled kueue.x-k8s.io/queue-name (STATE.lock held): a
    Workload each (jobset-NAME-HASH, label kueue.x-k8s.io/job-uid, owned by the JobSet), admitted
    in creation order while the chips fit STATE.tpu_quota (the JobSet unsuspended), else held
    with Kueue's pending message; an evicted one suspended again with its reason."""
    jobsets = sorted(((k, o) for k, o in STATE.objects.items() if k[0] == "jobsets"),
                     key=lambda item: int(item[1]["metadata"]["resourceVersion"]))
    used = 0
    for (_, ns, name), js in jobsets:
        meta = js["metadata"]
        queue = (meta.get("labels") or {}).get("kueue.x-k8s.io/queue-name")
        if not queue:
            continue
        uid = meta["uid"]
        wname = f"jobset-{name}-{uid[:5]}"
        wl = STATE.objects.setdefault(("workloads", ns, wname), {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": wname, "namespace": ns, "uid": str(uuid.uuid4()),
                         "labels": {"kueue.x-k8s.io/job-uid": uid},
                         "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2",
                                              "kind": "JobSet", "name": name, "uid": uid,
                                              "controller": True}],
                         "resourceVersion": str(STATE.version)},
            "spec": {"queueName": queue}, "status": {"conditions": []}})
        chips = jobset_chips(js)
        was = {c["type"]: c for c in wl["status"]["conditions"]}
        if (ns, name) in STATE.evicted:
            reason, message = STATE.evicted[(ns, name)]
            conds = [condition("QuotaReserved", "False", "Pending", "evicted"),
                     condition("Admitted", "False", "NoReservation",
                               "The workload has no reservation"),
                     condition("Evicted", "True", reason, message)]
            js["spec"]["suspend"] = True
        elif ("localqueues", ns, queue) not in STATE.objects:
            conds = [condition("QuotaReserved", "False", "Inadmissible",
                               f"LocalQueue {queue} doesn't exist")]
        elif was.get("Admitted", {}).get("status") == "True" or used + chips <= STATE.tpu_quota:
            used += chips
            conds = [condition("QuotaReserved", "True", "QuotaReserved",
                               f"Quota reserved in ClusterQueue {queue}-cq"),
                     condition("Admitted", "True", "Admitted", "The workload is admitted")]
            js["spec"]["suspend"] = False
        else:
            free = STATE.tpu_quota - used
            conds = [condition("QuotaReserved", "False", "Pending",
                               "couldn't assign flavors to pod set slice: insufficient unused "
                               f"quota for google.com/tpu in flavor tpu, {chips - free} more "
                               "needed")]
        def key(cs):
            return [(c["type"], c["status"], c["reason"], c["message"]) for c in cs]
        if key(conds) != key(wl["status"]["conditions"]):
            wl["status"]["conditions"] = conds
            STATE.version += 1
            wl["metadata"]["resourceVersion"] = str(STATE.version)
    # A JobSet's Workload goes with it (its owner reference).
    live = {o["metadata"]["uid"] for k, o in STATE.objects.items() if k[0] == "jobsets"}
    for key in [k for k, o in STATE.objects.items() if k[0] == "workloads"
                and o["metadata"]["labels"].get("kueue.x-k8s.io/job-uid") not in live]:
        STATE.objects.pop(key)


class Pod:
    def __init__(self, namespace, name, jobset, index):
        self.namespace, self.name, self.jobset, self.index = namespace, name, jobset, index
        self.proc = None
        self.phase = "Pending"
        self.exit_code = None
        self.stop_at = None  # when SIGKILL follows the SIGTERM


def map_paths(text, mapping):
    """text with every mapped path prefix (longest first) replaced by its local directory."""
    for src in sorted(mapping, key=len, reverse=True):
        text = re.sub(re.escape(src) + r"(?=/|\b|$)", mapping[src], text)
    return text


def start_pod(ns, js, rj_name, job_index, pod_spec):
    """Runs one pod of a JobSet's replicated job as a local process (STATE.lock held)."""
    import base64
    import os
    import subprocess
    name = f"{js['metadata']['name']}-{rj_name}-0-{job_index}-{uuid.uuid4().hex[:5]}"
    pod = Pod(ns, name, js["metadata"]["name"], job_index)
    root = os.path.join(STATE.kubelet_root, ns, name)
    os.makedirs(root, exist_ok=True)
    mapping = dict(STATE.image_paths)
    for local in STATE.pod_local:
        mapping[local] = os.path.join(root, "fs", local.strip("/"))
        os.makedirs(mapping[local], exist_ok=True)
    container = (pod_spec.get("containers") or [{}])[0]
    volumes = {v.get("name"): v for v in pod_spec.get("volumes") or []}
    missing = []

    def mounted(one):
        """The path mapping of one container: the pod's own paths and the volumes it mounts."""
        paths = dict(mapping)
        for mount in one.get("volumeMounts") or []:
            volume = volumes.get(mount.get("name"), {})
            secret_name = (volume.get("secret") or {}).get("secretName")
            where = os.path.join(root, "volumes", mount.get("name", "v"))
            os.makedirs(where, exist_ok=True)
            paths[mount["mountPath"]] = where
            if secret_name:
                secret = STATE.objects.get(("secrets", ns, secret_name))
                if secret is None:
                    missing.append(secret_name)
                    continue
                files = {k: v.encode() for k, v in (secret.get("stringData") or {}).items()}
                files.update({k: base64.b64decode(v)
                              for k, v in (secret.get("data") or {}).items()})
                for key, value in files.items():
                    with open(os.path.join(where, key), "wb") as f:
                        f.write(value)
        return paths

    init_failed = False
    for init in pod_spec.get("initContainers") or []:
        paths = mounted(init)
        if missing:
            break
        init_env = {k: v for k, v in os.environ.items() if not k.startswith("TAE_")}
        init_env["JOB_COMPLETION_INDEX"] = str(job_index)
        argv = [map_paths(arg, paths) for arg in
                (init.get("command") or []) + (init.get("args") or [])]
        with open(os.path.join(root, "init.log"), "ab") as log:
            done = subprocess.run(argv, env=init_env, cwd=root, stdin=subprocess.DEVNULL,
                                  stdout=log, stderr=subprocess.STDOUT, timeout=60)
        if done.returncode != 0:
            init_failed = True
            break
    mapping = mounted(container) if not missing else mapping
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAE_")}
    env["JOB_COMPLETION_INDEX"] = str(job_index)
    env["HOME"] = mapping.get("/root", root)
    for item in container.get("env") or []:
        env[item["name"]] = str(item.get("value", ""))
    command = [map_paths(arg, mapping) for arg in
               (container.get("command") or []) + (container.get("args") or [])]
    STATE.pods[(ns, name)] = pod
    STATE.objects[("pods", ns, name)] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": str(uuid.uuid4()),
                     "labels": {"jobset.sigs.k8s.io/jobset-name": pod.jobset,
                                "batch.kubernetes.io/job-completion-index": str(job_index)},
                     "resourceVersion": str(STATE.version)},
        "spec": pod_spec, "status": {"phase": "Pending"}}
    if STATE.pull_fail_next > 0:
        STATE.pull_fail_next -= 1
        STATE.objects[("pods", ns, name)]["status"] = {
            "phase": "Pending",
            "containerStatuses": [{"name": container.get("name", ""), "ready": False,
                                   "state": {"waiting": {
                                       "reason": "ErrImagePull",
                                       "message": f'failed to pull image "{container.get("image")}":'
                                                  ' not found'}}}]}
        return
    if missing or init_failed or STATE.fail_next > 0 or not command:
        if not missing and not init_failed and command:
            STATE.fail_next -= 1
        pod.phase, pod.exit_code = "Failed", 1
    else:
        with open(os.path.join(root, "log"), "ab") as log:
            pod.proc = subprocess.Popen(command, env=env, cwd=root, stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        pod.phase = "Running"
    STATE.objects[("pods", ns, name)]["status"]["phase"] = pod.phase


def signal_pod(pod, sig):
    import os
    if pod.proc is not None and pod.proc.poll() is None:
        try:
            os.killpg(pod.proc.pid, sig)
        except ProcessLookupError:
            pass


def stop_pod(pod, hard=False):
    """The kubelet stops a pod: SIGTERM, SIGKILL after the grace (at once when hard)."""
    import signal as sig
    if pod.stop_at is None:
        pod.stop_at = time.time() + (0 if hard else 5)
        signal_pod(pod, sig.SIGKILL if hard else sig.SIGTERM)


def set_jobset_condition(js, type_, reason, message):
    status = js.setdefault("status", {})
    conds = [c for c in status.get("conditions", []) if c.get("type") != type_]
    conds.append(condition(type_, "True", reason, message))
    status["conditions"] = conds
    STATE.version += 1
    js["metadata"]["resourceVersion"] = str(STATE.version)


def jobset_done(js):
    return any(c.get("type") in ("Failed", "Completed") and c.get("status") == "True"
               for c in (js.get("status") or {}).get("conditions", []))


def kubelet_reconcile():
    """Pods for admitted JobSets, stops for suspended, deleted or failed ones, and each pod's end
    into its JobSet's status (STATE.lock held)."""
    import signal as sig
    if STATE.kubelet_root is None:
        return
    for pod in STATE.pods.values():
        if pod.proc is not None and pod.exit_code is None and pod.proc.poll() is not None:
            pod.exit_code = pod.proc.returncode
            pod.phase = "Succeeded" if pod.exit_code == 0 and pod.stop_at is None else "Failed"
            obj = STATE.objects.get(("pods", pod.namespace, pod.name))
            if obj is not None:
                obj["status"]["phase"] = pod.phase
        if pod.stop_at is not None and pod.exit_code is None and time.time() >= pod.stop_at:
            signal_pod(pod, sig.SIGKILL)
    for (plural, ns, name), js in list(STATE.objects.items()):
        if plural != "jobsets":
            continue
        mine = [p for p in STATE.pods.values() if p.namespace == ns and p.jobset == name]
        if js.get("spec", {}).get("suspend") or jobset_done(js):
            for pod in mine:
                stop_pod(pod)
            continue
        if not mine:
            for rj in js.get("spec", {}).get("replicatedJobs", []):
                job = rj.get("template", {}).get("spec", {})
                for i in range(min(job.get("parallelism", 1), job.get("completions", 1))):
                    start_pod(ns, js, rj.get("name", "job"), i, job.get("template", {}).get("spec", {}))
            continue
        failed = [p for p in mine if p.phase == "Failed" and p.stop_at is None]
        if failed:
            set_jobset_condition(js, "Failed", "FailedJobs",
                                 f"jobset failed: pod {failed[0].name} exited with code "
                                 f"{failed[0].exit_code} (failurePolicy.maxRestarts 0)")
            for pod in mine:
                stop_pod(pod)
        elif all(p.phase == "Succeeded" for p in mine):
            set_jobset_condition(js, "Completed", "AllJobsCompleted", "jobset completed successfully")
    # A deleted JobSet's pods go with it.
    live = {(ns, name) for (plural, ns, name) in STATE.objects if plural == "jobsets"}
    for key, pod in list(STATE.pods.items()):
        if (pod.namespace, pod.jobset) not in live:
            stop_pod(pod)
            if pod.exit_code is not None or pod.proc is None:
                STATE.pods.pop(key)
                STATE.objects.pop(("pods", pod.namespace, pod.name), None)


def kubelet_loop():
    while True:
        with STATE.lock:
            kubelet_reconcile()
        time.sleep(0.2)


def stop_all_pods(*_):
    import signal as sig
    with STATE.lock:
        for pod in STATE.pods.values():
            signal_pod(pod, sig.SIGKILL)
    sys.exit(0)


def resource_list(group_version, resources):
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": [{"name": plural, "singularName": kind.lower(), "namespaced": namespaced,
                           "kind": kind,
                           "verbs": ["create", "delete", "deletecollection", "get", "list",
                                     "patch", "update", "watch"]}
                          for plural, (kind, namespaced) in resources.items()]}


SELECTOR_TERM = re.compile(
    r"\s*([A-Za-z0-9./_-]+)\s*(?:(==|=|!=)\s*([A-Za-z0-9._-]*)|\s+(in|notin)\s*\(([^)]*)\))\s*(?:,|$)")


def label_match(obj, selector):
    """Equality (k=v, k==v, k!=v) and set-based (k in (a,b), k notin (a,b)) terms, comma-joined,
    as the API server takes them; a selector it cannot parse is a 400, as there."""
    labels = obj.get("metadata", {}).get("labels", {}) or {}
    at = 0
    while at < len(selector):
        m = SELECTOR_TERM.match(selector, at)
        if m is None:
            raise ValueError(f"unable to parse requirement: {selector[at:]!r}")
        at = m.end()
        key, op, value, set_op, values = m.groups()
        have = labels.get(key)
        if op in ("=", "=="):
            if have != value:
                return False
        elif op == "!=":
            if have == value:
                return False
        else:
            members = {v.strip() for v in values.split(",") if v.strip()}
            if (set_op == "in") != (have in members):
                return False
    return True


def prune(obj, where):
    """Removes the field at a dotted path like spec.replicatedJobs[0].template.spec.bogus."""
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", where)
    for part in parts[:-1]:
        obj = obj[int(part[1:-1])] if part.startswith("[") else obj[part]
    obj.pop(parts[-1], None)


def proto_fields(data):
    """A protobuf message's fields as {number: [value, ...]}: varints as ints, length-delimited
    as bytes (enough for what kubectl sends as protobuf: a SelfSubjectAccessReview)."""
    fields, i = {}, 0

    def varint():
        nonlocal i
        shift = value = 0
        while True:
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value
    while i < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            value = varint()
        elif wire == 2:
            n = varint()
            value, i = data[i:i + n], i + n
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError(f"protobuf wire type {wire}")
        fields.setdefault(number, []).append(value)
    return fields


def access_review_from_protobuf(raw):
    """The resourceAttributes of a SelfSubjectAccessReview sent as Kubernetes protobuf: the
    "k8s\\0" magic, runtime.Unknown{typeMeta=1, raw=2}, the review's spec=2,
    resourceAttributes=1 {namespace=1, verb=2, group=3, version=4, resource=5, subresource=6,
    name=7} (k8s.io/api/authorization/v1/generated.proto)."""
    if not raw.startswith(b"k8s\x00"):
        raise ValueError("not Kubernetes protobuf")
    review = proto_fields(proto_fields(raw[4:])[2][0])
    attrs = proto_fields(proto_fields(review[2][0]).get(1, [b""])[0])
    names = {1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource",
             6: "subresource", 7: "name"}
    return {names[n]: v[0].decode() for n, v in attrs.items() if n in names}


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, code, body):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type",
                         "application/octet-stream" if body is None else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def raw_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def body(self):
        raw = self.raw_body()
        return json.loads(raw) if raw else {}

    def route(self, method):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        with STATE.lock:
            STATE.requests.append({"method": method, "path": self.path,
                                   "content_type": self.headers.get("Content-Type", ""),
                                   "accept": self.headers.get("Accept", "")})
        if method == "DELETE":
            self.body()  # kubectl sends its propagationPolicy: read it off the connection
        parts = [p for p in url.path.split("/") if p]
        if url.path == "/version":
            return 200, {"major": "1", "minor": "32", "gitVersion": "v1.32.0-fake",
                         "platform": "linux/amd64"}
        if url.path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"],
                         "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                         "serverAddress": "127.0.0.1"}]}
        if url.path == "/apis":
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                 "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v}}
                for g, (v, _) in GROUPS.items()]}
        if url.path == "/api/v1":
            return 200, resource_list("v1", CORE)
        if len(parts) == 3 and parts[0] == "apis" and parts[1] in GROUPS:
            version, resources = GROUPS[parts[1]]
            if parts[2] != version:
                return status(404, "NotFound", "the server could not find the requested resource")
            return 200, resource_list(f"{parts[1]}/{version}", resources)
        if url.path == "/openapi/v3":
            # The index kubectl reads to learn that the server validates fields itself: then it
            # sends fieldValidation=Strict and leaves unknown fields to the server.
            gvs = ["api/v1"] + [f"apis/{g}/{v}" for g, (v, _) in GROUPS.items()]
            return 200, {"paths": {gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash=fake"}
                                   for gv in gvs}}
        if url.path.startswith("/openapi/v3/"):
            gv = url.path[len("/openapi/v3/"):]
            if gv == "api/v1":
                group, version, known = "", "v1", CORE
            elif gv.startswith("apis/") and gv.split("/")[1] in GROUPS:
                group = gv.split("/")[1]
                version, known = GROUPS[group]
            else:
                return status(404, "NotFound", "the server could not find the requested resource")
            paths = {}
            for plural, (kind, namespaced) in known.items():
                where = f"/{gv}/namespaces/{{namespace}}/{plural}/{{name}}" if namespaced \
                    else f"/{gv}/{plural}/{{name}}"
                op = {"x-kubernetes-group-version-kind":
                      {"group": group, "version": version, "kind": kind},
                      "parameters": [{"name": "fieldValidation", "in": "query",
                                      "schema": {"type": "string"}}],
                      "responses": {"200": {"description": "OK"}}}
                paths[where] = {"patch": op, "put": op}
            return 200, {"openapi": "3.0.0", "info": {"title": "fake_k8s", "version": version},
                         "paths": paths, "components": {"schemas": {}}}
        if url.path == "/openapi/v2":
            # An empty document: kubectl before 1.27 then validates nothing on the client (and
            # sends no fieldValidation, so unknown fields are dropped, as a real server does).
            return 200, None
        if url.path.startswith("/openapi"):
            return status(404, "NotFound", "the server could not find the requested resource")
        if url.path == "/_control/deny" and method == "POST":
            b = self.body()
            with STATE.lock:
                STATE.denied.add((b["verb"], b["resource"]))
            return 200, {}
        if url.path == "/_control/drop_group" and method == "POST":
            b = self.body()
            with STATE.lock:
                GROUPS.pop(b["group"], None)  # as a cluster without that CRD
            return 200, {}
        if url.path == "/_control/quota" and method == "POST":
            with STATE.lock:
                STATE.tpu_quota = int(self.body()["chips"])
                kueue_reconcile()
            return 200, {}
        if url.path == "/_control/evict" and method == "POST":
            b = self.body()
            with STATE.lock:
                STATE.evicted[(b["namespace"], b["jobset"])] = (
                    b.get("reason", "Preempted"),
                    b.get("message", "Preempted to accommodate a workload (UID: 0) due to "
                                     "prioritization in the ClusterQueue"))
                kueue_reconcile()
            return 200, {}
        if url.path == "/_control/node_lost" and method == "POST":
            b = self.body()
            with STATE.lock:
                js = STATE.objects.get(("jobsets", b["namespace"], b["jobset"]))
                if js is None:
                    return status(404, "NotFound", f'jobsets "{b["jobset"]}" not found')
                killed = []
                for pod in STATE.pods.values():
                    if pod.namespace == b["namespace"] and pod.jobset == b["jobset"]:
                        if pod.proc is not None and pod.proc.poll() is None:
                            killed.append(pod.proc.pid)
                        stop_pod(pod, hard=True)
                set_jobset_condition(js, "Failed", "FailedJobs",
                                     "jobset failed: node gke-tpu-0 was lost (NodeLost)")
            return 200, {"killed": killed}
        if url.path == "/_control/pull_fail" and method == "POST":
            with STATE.lock:
                STATE.pull_fail_next = int(self.body()["count"])
            return 200, {}
        if url.path == "/_control/fail_pods" and method == "POST":
            with STATE.lock:
                STATE.fail_next = int(self.body()["count"])
            return 200, {}
        if url.path == "/_control/pods":
            with STATE.lock:
                return 200, [{"namespace": p.namespace, "name": p.name, "jobset": p.jobset,
                              "index": p.index, "phase": p.phase,
                              "pid": p.proc.pid if p.proc is not None else 0}
                             for p in STATE.pods.values()]
        if url.path == "/_control/requests":
            with STATE.lock:
                return 200, list(STATE.requests)
        # /api/v1/namespaces/NS/PLURAL[/NAME] or /apis/G/V/namespaces/NS/PLURAL[/NAME]
        if parts[:2] == ["api", "v1"]:
            rest, api_version, known = parts[2:], "v1", CORE
        elif len(parts) >= 3 and parts[0] == "apis" and parts[1] in GROUPS:
            version, known = GROUPS[parts[1]]
            rest, api_version = parts[3:], f"{parts[1]}/{version}"
        else:
            return status(404, "NotFound", "the server could not find the requested resource")
        namespace = ""
        if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
            namespace, rest = rest[1], rest[2:]
        if not rest or rest[0] not in known:
            return status(404, "NotFound", "the server could not find the requested resource")
        plural, name = rest[0], (rest[1] if len(rest) > 1 else "")
        kind = known[plural][0]
        verb = {"GET": "get" if name else "list", "POST": "create", "PUT": "update",
                "PATCH": "patch", "DELETE": "delete"}[method]
        if plural == "selfsubjectaccessreviews":
            if "protobuf" in self.headers.get("Content-Type", ""):
                attrs = access_review_from_protobuf(self.raw_body())
            else:
                attrs = self.body().get("spec", {}).get("resourceAttributes", {})
            res = attrs.get("resource", "")
            if attrs.get("group"):
                res = f"{res}.{attrs['group']}"
            allowed = (attrs.get("verb"), res) not in STATE.denied and \
                (attrs.get("verb"), attrs.get("resource")) not in STATE.denied
            return 201, {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                         "spec": {"resourceAttributes": attrs},
                         "status": {"allowed": allowed}}
        with STATE.lock:
            if (verb, plural) in STATE.denied or (verb, f"{plural}.{api_version.split('/')[0]}") in STATE.denied:
                return status(403, "Forbidden",
                              f'{plural} is forbidden: User "fake" cannot {verb} resource '
                              f'"{plural}" in namespace "{namespace}"')
            key = (plural, namespace, name)
            if method == "GET" and name:
                if key not in STATE.objects:
                    return status(404, "NotFound", f'{plural} "{name}" not found')
                return 200, STATE.objects[key]
            if method == "GET":
                selector = query.get("labelSelector", [""])[0]
                try:
                    items = [o for (p, ns, _), o in sorted(STATE.objects.items())
                             if p == plural and (not namespace or ns == namespace)
                             and label_match(o, selector)]
                except ValueError as e:
                    return status(400, "BadRequest", str(e))
                return 200, {"kind": f"{kind}List", "apiVersion": api_version,
                             "metadata": {"resourceVersion": str(STATE.version)}, "items": items}
            if method == "DELETE":
                if key not in STATE.objects:
                    return status(404, "NotFound", f'{plural} "{name}" not found')
                gone = STATE.objects.pop(key)
                STATE.version += 1
                if plural == "jobsets":
                    STATE.evicted.pop((namespace, name), None)
                kueue_reconcile()
                return 200, gone
            obj = self.body()
            if method == "PATCH":
                if key not in STATE.objects:
                    return status(404, "NotFound", f'{plural} "{name}" not found')
                obj = merge_patch(STATE.objects[key], obj)
            bad = unknown_fields(obj, SCHEMAS.get(kind))
            if bad and query.get("fieldValidation", [""])[0] == "Strict":
                # As the API server answers kubectl's fieldValidation=Strict: 400 on create and
                # update, 422 on patch. Without it a server drops unknown fields silently.
                unknown = ", ".join(f'unknown field "{b}"' for b in bad)
                if method == "PATCH":
                    return status(422, "Invalid",
                                  f'{kind}.{api_version.split("/")[0]} "{name}" is invalid: '
                                  f'strict decoding error: {unknown}')
                return status(400, "BadRequest",
                              f'{kind} in version "{api_version.split("/")[-1]}" cannot be '
                              f'handled as a {kind}: strict decoding error: {unknown}')
            for where in bad:
                prune(obj, where)
            if kind == "Secret" and obj.get("stringData"):
                # As the API server stores it: stringData merged into data, base64.
                import base64
                data = obj.setdefault("data", {})
                for k, v in obj.pop("stringData").items():
                    data[k] = base64.b64encode(str(v).encode()).decode()
            meta = obj.setdefault("metadata", {})
            if method == "POST":
                name = meta.get("name", "")
                key = (plural, namespace, name)
                if key in STATE.objects:
                    return status(409, "AlreadyExists", f'{plural} "{name}" already exists')
                meta["uid"] = str(uuid.uuid4())
                meta["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            elif key not in STATE.objects:
                return status(404, "NotFound", f'{plural} "{name}" not found')
            else:
                meta.setdefault("uid", STATE.objects[key]["metadata"].get("uid"))
            if namespace:
                meta["namespace"] = namespace
            STATE.version += 1
            meta["resourceVersion"] = str(STATE.version)
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind)
            STATE.objects[key] = obj
            kueue_reconcile()
            return (201 if method == "POST" else 200), STATE.objects[key]

    def handle_method(self, method):
        try:
            code, body = self.route(method)
        except Exception as error:  # a fake's bug must show, not hang kubectl
            code, body = status(500, "InternalError", f"fake_k8s: {error!r}")
        self.reply(code, body)

    def do_GET(self):
        self.handle_method("GET")

    def do_POST(self):
        self.handle_method("POST")

    def do_PUT(self):
        self.handle_method("PUT")

    def do_PATCH(self):
        self.handle_method("PATCH")

    def do_DELETE(self):
        self.handle_method("DELETE")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--kubelet-root")
    ap.add_argument("--image-path", action="append", default=[], metavar="PATH=DIR")
    ap.add_argument("--pod-local", action="append", default=[], metavar="PATH")
    args = ap.parse_args()
    if args.kubelet_root:
        import signal as sig
        STATE.kubelet_root = args.kubelet_root
        STATE.image_paths = dict(item.split("=", 1) for item in args.image_path)
        STATE.pod_local = args.pod_local
        sig.signal(sig.SIGTERM, stop_all_pods)
        threading.Thread(target=kubelet_loop, daemon=True).start()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(f"{server.server_address[1]}\n")
    import os
    os.replace(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
