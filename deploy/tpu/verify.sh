#!/usr/bin/env bash
# verify.sh NAME [options]: checks that the TPU VM NAME is READY, lists its workers' IPs and
# (unless --no-ssh) checks on every worker that docker is installed and the tae-agent container
# runs.
#
#   --zones Z1,Z2,...   zones to look in, in order ($TAE_TPU_ZONES, default us-central2-b)
#   --no-ssh            only the API checks (state, workers); no ssh to the workers
#   --project P         project (default: gcloud's, or $TAE_GCP_PROJECT)
#   --dry-run           print the gcloud commands instead of running them
#
# Commands (deploy/tpu/lib.sh):
#   gcloud compute tpus tpu-vm describe NAME --zone Z --format=json
#   gcloud compute tpus tpu-vm ssh NAME --zone Z --worker=all --command '...'
# Exit status 0 when every check passed.
set -euo pipefail
# shellcheck source=deploy/tpu/lib.sh
source "$(dirname "$0")/lib.sh"

# Run on every worker: docker present, the tae-agent container running.
# shellcheck disable=SC2016  # expanded on the worker, not here
WORKER_CHECK='set -u
host=$(hostname)
if ! command -v docker >/dev/null; then echo "$host: docker is not installed"; exit 1; fi
state=$(sudo docker inspect --format "{{.State.Status}}" tae-agent 2>/dev/null || echo "not created")
echo "$host: docker $(sudo docker version --format "{{.Server.Version}}" 2>/dev/null || echo "(daemon not running)"), tae-agent container: $state"
test "$state" = running'

name=""
ssh=1
while [[ $# -gt 0 ]]; do
  tpu_common_option "$@"
  if [[ $TPU_SHIFT -gt 0 ]]; then shift "$TPU_SHIFT"; continue; fi
  case $1 in
    -h | --help) tpu_usage; exit 0 ;;
    --no-ssh) ssh=0 ;;
    -*) tpu_bad_option "$1" ;;
    *) if [[ -n $name ]]; then tpu_bad_option "$1"; fi; name=$1 ;;
  esac
  shift
done
if [[ -z $name ]]; then tpu_die "no TPU VM name given (usage: $TPU_SCRIPT NAME [options])"; fi
mapfile -t zones < <(tpu_zone_list)
if [[ ${#zones[@]} -eq 0 ]]; then tpu_die "no zones given (--zones Z1,Z2)"; fi
tpu_require_tools gcloud python3

if [[ $TPU_DRY_RUN == 1 ]]; then
  for zone in "${zones[@]}"; do
    tpu_cmd_describe "$name" "$zone"
    tpu_run
  done
  if [[ $ssh == 1 ]]; then
    echo "# in the zone where it was found:"
    tpu_cmd_ssh "$name" ZONE "$WORKER_CHECK"
    tpu_run
  fi
  exit 0
fi

zone=""
for candidate in "${zones[@]}"; do
  tpu_cmd_describe "$name" "$candidate"
  if tpu_run; then
    zone=$candidate
    break
  fi
  if ! tpu_not_found; then tpu_fail "describing $name in $candidate"; fi
done
if [[ -z $zone ]]; then
  tpu_die "FAIL: no TPU VM $name in ${zones[*]} (create it with deploy/tpu/create.sh $name," \
    "or list them with gcloud compute tpus tpu-vm list --zone ZONE)"
fi

mapfile -t node < <(tpu_json_node "$TPU_OUT")
state=${node[0]}
if [[ $state != READY ]]; then
  tpu_die "FAIL: $name in $zone is $state, not READY"
fi
if [[ ${#node[@]} -lt 2 ]]; then tpu_die "FAIL: $name in $zone is READY but lists no workers"; fi
echo "$name in $zone: READY, $((${#node[@]} - 1)) worker(s) (index internal-ip external-ip):"
printf '  %s\n' "${node[@]:1}"

if [[ $ssh == 1 ]]; then
  tpu_cmd_ssh "$name" "$zone" "$WORKER_CHECK"
  if ! tpu_run; then
    cat "$TPU_OUT"
    tpu_fail "checking docker and the tae-agent container on the workers of $name (start the agents: README, Running on Cloud TPU VMs)"
  fi
  cat "$TPU_OUT"
fi
echo "OK: $name"
