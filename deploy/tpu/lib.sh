# shellcheck shell=bash disable=SC2034  # the settings are used by the scripts that source this
# deploy/tpu/lib.sh: sourced by every deploy/tpu script. It builds every gcloud (and docker)
# command line these scripts issue, in one place, so that taed's gcloud-tpu provider can issue
# exactly the same ones. A builder sets the array CMD; tpu_run runs it (or, with --dry-run, only
# prints it).
#
# Settings (environment; the scripts' flags override them):
#   TAE_GCP_PROJECT      project; empty: gcloud's configured project (gcloud config set project P)
#   TAE_TPU_ZONES        zones to try, in order, comma-separated           [us-central2-b]
#   TAE_TPU_ACCELERATOR  accelerator type                                  [v4-8]
#   TAE_TPU_VERSION      TPU VM runtime version (the VM's OS image)        [tpu-ubuntu2204-base]
#   TAE_TPU_LABEL        label every TPU VM made here carries, key=value   [tae=1]
#   TAE_TPU_BUCKET       GCS bucket name (without gs://)
#   TAE_TPU_REGION       region of the bucket and the Artifact Registry repository [us-central2]
#   TAE_TPU_REPOSITORY   Artifact Registry repository of the agent image   [tae]

TPU_PROJECT=${TAE_GCP_PROJECT:-}
TPU_ZONES=${TAE_TPU_ZONES:-us-central2-b}
TPU_ACCELERATOR=${TAE_TPU_ACCELERATOR:-v4-8}
TPU_VERSION=${TAE_TPU_VERSION:-tpu-ubuntu2204-base}
TPU_LABEL=${TAE_TPU_LABEL:-tae=1}
TPU_BUCKET=${TAE_TPU_BUCKET:-}
TPU_REGION=${TAE_TPU_REGION:-us-central2}
TPU_REPOSITORY=${TAE_TPU_REPOSITORY:-tae}
TPU_DRY_RUN=0
TPU_SCRIPT=$(basename "$0")
TPU_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TPU_REPO_ROOT=$(cd "$TPU_LIB_DIR/../.." && pwd)

# Output of the last tpu_run: stdout and stderr, in these files.
TPU_TMP=$(mktemp -d)
TPU_OUT=$TPU_TMP/out
TPU_ERR=$TPU_TMP/err
trap 'rm -rf "$TPU_TMP"' EXIT
: >"$TPU_OUT"
: >"$TPU_ERR"

# ---- messages ----

tpu_die() {  # tpu_die MESSAGE...: one clear line (or a few) on stderr, exit 1
  printf '%s: %s\n' "$TPU_SCRIPT" "$*" >&2
  exit 1
}

tpu_note() { printf '%s: %s\n' "$TPU_SCRIPT" "$*" >&2; }

# tpu_usage: prints the script's header comment (from line 2 to the first line not starting with
# '#') as its --help.
tpu_usage() {
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
}

# ---- options every script takes ----

# tpu_common_option ARG [VALUE]: handles --project, --zones, --dry-run. Sets TPU_SHIFT to the
# number of arguments used (0: not a common option).
tpu_common_option() {
  TPU_SHIFT=0
  case $1 in
    --project) tpu_need_value "$@"; TPU_PROJECT=$2; TPU_SHIFT=2 ;;
    --project=*) TPU_PROJECT=${1#*=}; TPU_SHIFT=1 ;;
    --zones) tpu_need_value "$@"; TPU_ZONES=$2; TPU_SHIFT=2 ;;
    --zones=*) TPU_ZONES=${1#*=}; TPU_SHIFT=1 ;;
    --dry-run) TPU_DRY_RUN=1; TPU_SHIFT=1 ;;
  esac
}

tpu_need_value() {  # tpu_need_value FLAG [VALUE]: fails when FLAG has no value
  if [[ $# -lt 2 || -z $2 || $2 == --* ]]; then
    tpu_die "$1 needs a value (see $TPU_SCRIPT --help)"
  fi
}

tpu_bad_option() { tpu_die "unknown argument '$1' (see $TPU_SCRIPT --help)"; }

# tpu_zone_list: the zones of TPU_ZONES, one a line.
tpu_zone_list() {
  local zone zones
  IFS=',' read -r -a zones <<<"$TPU_ZONES"
  for zone in "${zones[@]}"; do
    zone=${zone// /}
    if [[ -n $zone ]]; then echo "$zone"; fi
  done
}

# tpu_require_tools TOOL...: gcloud, python3 (JSON parsing) or docker must be on PATH, except in
# a dry run.
tpu_require_tools() {
  local tool
  for tool in "$@"; do
    if command -v "$tool" >/dev/null; then continue; fi
    if [[ $TPU_DRY_RUN == 1 && $tool != python3 ]]; then continue; fi
    case $tool in
      gcloud) tpu_die "gcloud is not on PATH: install the Google Cloud CLI" \
        "(https://cloud.google.com/sdk/docs/install, Debian: apt-get install google-cloud-cli)," \
        "then run: gcloud auth login" ;;
      python3) tpu_die "python3 is not on PATH (it parses gcloud's JSON): apt-get install python3" ;;
      docker) tpu_die "docker is not on PATH: install Docker (Debian: apt-get install docker.io)" ;;
      *) tpu_die "$tool is not on PATH" ;;
    esac
  done
}

# ---- the command lines ----

tpu_project_flag() {  # appends --project P to CMD when a project was given
  if [[ -n $TPU_PROJECT ]]; then CMD+=(--project "$TPU_PROJECT"); fi
}

# Which zones offer an accelerator type (offered is not the same as having capacity now). The
# tpu-vm group asks the v2 API, which knows the TPU VM types (`gcloud compute tpus
# accelerator-types` asks the older v1 API, made for TPU Nodes).
tpu_cmd_accelerator_describe() {  # TYPE ZONE
  CMD=(gcloud compute tpus tpu-vm accelerator-types describe "$1" --zone "$2" --format=json)
  tpu_project_flag
}

# SCHEDULING is on-demand, spot or preemptible; LABELS is k=v[,k=v...].
tpu_cmd_create() {  # NAME ZONE TYPE VERSION SCHEDULING LABELS
  CMD=(gcloud compute tpus tpu-vm create "$1" --zone "$2" --accelerator-type "$3" --version "$4")
  case $5 in
    spot) CMD+=(--spot) ;;
    preemptible) CMD+=(--preemptible) ;;
  esac
  if [[ -n $6 ]]; then CMD+=(--labels "$6"); fi
  tpu_project_flag
}

tpu_cmd_describe() {  # NAME ZONE
  CMD=(gcloud compute tpus tpu-vm describe "$1" --zone "$2" --format=json)
  tpu_project_flag
}

tpu_cmd_list() {  # ZONE [FILTER]
  CMD=(gcloud compute tpus tpu-vm list --zone "$1")
  if [[ -n ${2:-} ]]; then CMD+=(--filter "$2"); fi
  CMD+=(--format=json)
  tpu_project_flag
}

tpu_cmd_delete() {  # NAME ZONE
  CMD=(gcloud compute tpus tpu-vm delete "$1" --zone "$2" --quiet)
  tpu_project_flag
}

tpu_cmd_ssh() {  # NAME ZONE COMMAND: on every worker of the slice
  CMD=(gcloud compute tpus tpu-vm ssh "$1" --zone "$2" --worker=all --command "$3")
  tpu_project_flag
}

tpu_cmd_guest_attributes() {  # NAME ZONE: the workers' ssh host keys, among others
  CMD=(gcloud compute tpus tpu-vm get-guest-attributes "$1" --zone "$2" --format=json)
  tpu_project_flag
}

# A queued resource NAME asking for one TPU VM, also called NAME; SCHEDULING on-demand or spot;
# VALID_UNTIL a duration like 6h or empty.
tpu_cmd_queued_create() {  # NAME ZONE TYPE VERSION SCHEDULING VALID_UNTIL LABELS
  CMD=(gcloud compute tpus queued-resources create "$1" --node-id "$1" --zone "$2"
    --accelerator-type "$3" --runtime-version "$4")
  if [[ $5 == spot ]]; then CMD+=(--spot); fi
  if [[ -n $6 ]]; then CMD+=(--valid-until-duration "$6"); fi
  if [[ -n $7 ]]; then CMD+=(--labels "$7"); fi
  tpu_project_flag
}

tpu_cmd_queued_list() {  # ZONE
  CMD=(gcloud compute tpus queued-resources list --zone "$1" --format=json)
  tpu_project_flag
}

tpu_cmd_queued_delete() {  # ID ZONE: --force also deletes the queued resource's TPU VMs
  CMD=(gcloud compute tpus queued-resources delete "$1" --zone "$2" --force --quiet)
  tpu_project_flag
}

tpu_cmd_bucket_create() {  # NAME LOCATION
  CMD=(gcloud storage buckets create "gs://$1" --location "$2" --uniform-bucket-level-access)
  tpu_project_flag
}

tpu_cmd_bucket_delete() {  # NAME: every object, then the bucket
  CMD=(gcloud storage rm --recursive "gs://$1")
  tpu_project_flag
}

tpu_cmd_repository_describe() {  # REPOSITORY REGION
  CMD=(gcloud artifacts repositories describe "$1" --location "$2" --format=json)
  tpu_project_flag
}

tpu_cmd_repository_create() {  # REPOSITORY REGION
  CMD=(gcloud artifacts repositories create "$1" --repository-format=docker --location "$2"
    --description "TAE agent images")
  tpu_project_flag
}

tpu_cmd_repository_delete() {  # REPOSITORY REGION: the repository and every image in it
  CMD=(gcloud artifacts repositories delete "$1" --location "$2" --quiet)
  tpu_project_flag
}

tpu_cmd_configure_docker() {  # REGION: docker push to REGION-docker.pkg.dev uses gcloud's login
  CMD=(gcloud auth configure-docker "$1-docker.pkg.dev" --quiet)
}

tpu_cmd_project_get() {  # the configured project (a local read, no request)
  CMD=(gcloud config get-value core/project)
}

tpu_image_name() {  # REGION PROJECT REPOSITORY TAG: the agent image's full name
  echo "$1-docker.pkg.dev/$2/$3/tae-agent:$4"
}

tpu_cmd_docker_build() {  # IMAGE BASE_IMAGE
  CMD=(docker build --build-arg "BASE_IMAGE=$2" -f "$TPU_REPO_ROOT/deploy/docker/Dockerfile"
    -t "$1" "$TPU_REPO_ROOT")
}

tpu_cmd_docker_push() {  # IMAGE
  CMD=(docker push "$1")
}

# ---- running them ----

# tpu_quote ARG...: the arguments as one shell command line (single quotes where needed).
tpu_quote() {
  local arg out=""
  for arg in "$@"; do
    if [[ $arg =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then
      out+=" $arg"
    else
      out+=" '${arg//\'/\'\\\'\'}'"
    fi
  done
  echo "${out# }"
}

# tpu_run: runs CMD with its output in TPU_OUT and TPU_ERR; returns its exit code. With --dry-run
# it prints CMD on stdout instead and returns 0 (TPU_OUT and TPU_ERR empty).
tpu_run() {
  : >"$TPU_OUT"
  : >"$TPU_ERR"
  if [[ $TPU_DRY_RUN == 1 ]]; then
    tpu_quote "${CMD[@]}"
    return 0
  fi
  "${CMD[@]}" >"$TPU_OUT" 2>"$TPU_ERR"
}

# tpu_run_shown: tpu_run for commands that change something: says what it runs first.
tpu_run_shown() {
  if [[ $TPU_DRY_RUN == 0 ]]; then tpu_note "running: $(tpu_quote "${CMD[@]}")"; fi
  tpu_run
}

# tpu_fail WHAT: the last command failed; explains why as far as its stderr tells, names the
# command that fixes it, and exits 1.
tpu_fail() {
  local what=$1 err hint=""
  err=$(cat "$TPU_ERR")
  if grep -qiE 'not currently have an active account|reauthentication|invalid_grant|UNAUTHENTICATED|credentials' "$TPU_ERR"; then
    hint="gcloud is not logged in: run  gcloud auth login"
  elif grep -qiE 'required property \[project\]|project.*is not set' "$TPU_ERR"; then
    hint="no project: run  gcloud config set project PROJECT  (or pass --project PROJECT)"
  elif grep -qiE 'SERVICE_DISABLED|has not been used in project|API .*is disabled|not been enabled' "$TPU_ERR"; then
    hint="an API is not enabled: run  gcloud services enable tpu.googleapis.com storage.googleapis.com artifactregistry.googleapis.com"
  elif grep -qiE 'quota|QUOTA_EXCEEDED' "$TPU_ERR"; then
    hint="out of quota: see  https://console.cloud.google.com/iam-admin/quotas  (Cloud TPU API)"
  elif grep -qiE 'PERMISSION_DENIED|does not have permission|403' "$TPU_ERR"; then
    hint="permission denied: your account needs e.g. roles/tpu.admin on the project"
  fi
  printf '%s: %s failed: %s\n' "$TPU_SCRIPT" "$what" "$(tpu_quote "${CMD[@]}")" >&2
  if [[ -n $err ]]; then printf '%s\n' "$err" | sed 's/^/  /' >&2; fi
  if [[ -n $hint ]]; then printf '%s: %s\n' "$TPU_SCRIPT" "$hint" >&2; fi
  exit 1
}

tpu_not_found() { grep -qE 'NOT_FOUND|was not found|404' "$TPU_ERR"; }

tpu_already_exists() { grep -qiE 'ALREADY_EXISTS|already exists|already own' "$TPU_ERR"; }

# A create refused for lack of capacity (a stockout) or zone quota: worth trying another zone.
tpu_no_capacity() {
  grep -qiE 'no more capacity|insufficient capacity|stockout|RESOURCE_EXHAUSTED|"code": 8|resource pool exhausted|currently unavailable|quota' "$TPU_ERR"
}

# ---- reading gcloud's JSON (python3, standard library only) ----

# tpu_json_node FILE: "STATE" then one line per worker: "INDEX IP EXTERNAL_IP" (- when none).
tpu_json_node() {
  python3 - "$1" <<'PY'
import json, sys
node = json.load(open(sys.argv[1]))
print(node.get("state", "UNKNOWN"))
for i, ep in enumerate(node.get("networkEndpoints") or []):
    print(i, ep.get("ipAddress") or "-", (ep.get("accessConfig") or {}).get("externalIp") or "-")
PY
}

# tpu_json_nodes FILE KEY=VALUE NAME: nodes of a list carrying the label KEY=VALUE (or named
# NAME when NAME is not empty), one a line: "NAME STATE QUEUED_RESOURCE_ID" (- when none).
tpu_json_nodes() {
  python3 - "$@" <<'PY'
import json, sys
text = open(sys.argv[1]).read().strip()
key, _, value = sys.argv[2].partition("=")
name = sys.argv[3]
for node in json.loads(text) if text else []:
    short = node["name"].rsplit("/", 1)[-1]
    labelled = (node.get("labels") or {}).get(key) == value
    if (short == name) if name else labelled:
        qr = node.get("queuedResource", "").rsplit("/", 1)[-1] or "-"
        print(short, node.get("state", "UNKNOWN"), qr)
PY
}

# tpu_json_queued FILE KEY=VALUE NAME: queued resources whose TPU VMs carry the label (or whose
# id or node id is NAME), one a line: "ID STATE".
tpu_json_queued() {
  python3 - "$@" <<'PY'
import json, sys
text = open(sys.argv[1]).read().strip()
key, _, value = sys.argv[2].partition("=")
name = sys.argv[3]
for qr in json.loads(text) if text else []:
    ident = qr["name"].rsplit("/", 1)[-1]
    specs = (qr.get("tpu") or {}).get("nodeSpec") or []
    if name:
        match = ident == name or any(s.get("nodeId") == name for s in specs)
    else:
        match = any(((s.get("node") or {}).get("labels") or {}).get(key) == value for s in specs)
    if match:
        print(ident, (qr.get("state") or {}).get("state", "UNKNOWN"))
PY
}
