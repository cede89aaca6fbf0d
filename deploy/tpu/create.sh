#!/usr/bin/env bash
# create.sh NAME [options]: creates the TPU VM NAME, trying the zones in order and falling over to
# the next zone when one has no capacity (or no quota) left, then waits until it is READY.
#
#   --zones Z1,Z2,...       zones to try, in order ($TAE_TPU_ZONES, default us-central2-b)
#   --accelerator-type T    e.g. v4-8, v4-32 ($TAE_TPU_ACCELERATOR, default v4-8)
#   --version V             runtime version ($TAE_TPU_VERSION, default tpu-ubuntu2204-base)
#   --spot | --preemptible  cheaper capacity that can be taken back (default: on-demand)
#   --labels k=v[,k=v]      more labels; the VM always carries tae=1 ($TAE_TPU_LABEL), which is
#                           what teardown.sh deletes by
#   --timeout SECONDS       how long to wait for READY after the create (default 900)
#   --project P             project (default: gcloud's, or $TAE_GCP_PROJECT)
#   --dry-run               print the gcloud commands instead of running them
#
# The command per zone (deploy/tpu/lib.sh builds it):
#   gcloud compute tpus tpu-vm create NAME --zone Z --accelerator-type T --version V
#       [--spot|--preemptible] --labels tae=1[,...]
# then  gcloud compute tpus tpu-vm describe NAME --zone Z --format=json  until state READY.
# Prints "NAME ZONE" on stdout at the end (the zone it landed in).
set -euo pipefail
# shellcheck source=deploy/tpu/lib.sh
source "$(dirname "$0")/lib.sh"

name=""
scheduling=on-demand
labels=""
timeout=900
while [[ $# -gt 0 ]]; do
  tpu_common_option "$@"
  if [[ $TPU_SHIFT -gt 0 ]]; then shift "$TPU_SHIFT"; continue; fi
  case $1 in
    -h | --help) tpu_usage; exit 0 ;;
    --accelerator-type) tpu_need_value "$@"; TPU_ACCELERATOR=$2; shift ;;
    --version) tpu_need_value "$@"; TPU_VERSION=$2; shift ;;
    --spot) scheduling=spot ;;
    --preemptible) scheduling=preemptible ;;
    --labels) tpu_need_value "$@"; labels=$2; shift ;;
    --timeout) tpu_need_value "$@"; timeout=$2; shift ;;
    -*) tpu_bad_option "$1" ;;
    *) if [[ -n $name ]]; then tpu_bad_option "$1"; fi; name=$1 ;;
  esac
  shift
done
if [[ -z $name ]]; then tpu_die "no TPU VM name given (usage: $TPU_SCRIPT NAME [options])"; fi
if [[ ! $name =~ ^[a-z]([-a-z0-9]*[a-z0-9])?$ ]]; then
  tpu_die "'$name' is not a valid TPU VM name: lower-case letters, digits and '-', starting with a letter"
fi
if [[ ! $timeout =~ ^[0-9]+$ ]]; then tpu_die "--timeout: '$timeout' is not a number of seconds"; fi
all_labels=$TPU_LABEL${labels:+,$labels}
mapfile -t zones < <(tpu_zone_list)
if [[ ${#zones[@]} -eq 0 ]]; then tpu_die "no zones given (--zones Z1,Z2)"; fi
tpu_require_tools gcloud python3

if [[ $TPU_DRY_RUN == 1 ]]; then
  for i in "${!zones[@]}"; do
    if [[ $i -gt 0 ]]; then echo "# only if ${zones[i - 1]} has no capacity:"; fi
    tpu_cmd_create "$name" "${zones[i]}" "$TPU_ACCELERATOR" "$TPU_VERSION" "$scheduling" \
      "$all_labels"
    tpu_run
  done
  echo "# then, in the zone that worked, until state is READY:"
  tpu_cmd_describe "$name" "ZONE"
  tpu_run
  exit 0
fi

zone=""
for candidate in "${zones[@]}"; do
  tpu_note "creating $name ($TPU_ACCELERATOR, $scheduling) in $candidate"
  tpu_cmd_create "$name" "$candidate" "$TPU_ACCELERATOR" "$TPU_VERSION" "$scheduling" \
    "$all_labels"
  if tpu_run_shown; then
    zone=$candidate
    break
  fi
  if tpu_already_exists; then
    tpu_die "a TPU VM $name already exists in $candidate: check it with" \
      "deploy/tpu/verify.sh $name --zones $candidate, or delete it with" \
      "deploy/tpu/teardown.sh --name $name --zones $candidate"
  fi
  if tpu_no_capacity; then
    tpu_note "no capacity for $TPU_ACCELERATOR in $candidate: $(grep -m1 -oiE '(no more capacity|insufficient capacity|stockout|quota)[^"\\]*' "$TPU_ERR" || true)"
    continue
  fi
  tpu_fail "creating $name in $candidate"
done
if [[ -z $zone ]]; then
  tpu_die "no zone of ${zones[*]} had capacity for $TPU_ACCELERATOR; try other zones" \
    "(deploy/tpu/check-zones.sh --accelerator-type $TPU_ACCELERATOR --zones ...), --spot, or later"
fi

# The create waits for its operation, so the VM is usually READY already; poll until it is.
deadline=$((SECONDS + timeout))
while :; do
  tpu_cmd_describe "$name" "$zone"
  if ! tpu_run; then tpu_fail "describing $name"; fi
  mapfile -t node < <(tpu_json_node "$TPU_OUT")
  state=${node[0]}
  case $state in
    READY) break ;;
    PREEMPTED | TERMINATED | STOPPED | FAILED | DELETING)
      tpu_die "$name in $zone is $state instead of READY; delete it with" \
        "deploy/tpu/teardown.sh --name $name --zones $zone" ;;
  esac
  if [[ $SECONDS -ge $deadline ]]; then
    tpu_die "$name in $zone is still $state after ${timeout}s; look with" \
      "gcloud compute tpus tpu-vm describe $name --zone $zone"
  fi
  tpu_note "$name is $state; waiting for READY"
  sleep 5
done
tpu_note "$name is READY in $zone; workers (index internal-ip external-ip):"
printf '  %s\n' "${node[@]:1}" >&2
echo "$name $zone"
