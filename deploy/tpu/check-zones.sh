#!/usr/bin/env bash
# check-zones.sh [options]: for each zone of a list, asks whether it offers the accelerator type
# and reports the zones that do. Offered is not the same as free: a create can still find no
# capacity there (create.sh then tries the next zone).
#
#   --accelerator-type T   e.g. v4-8 ($TAE_TPU_ACCELERATOR, default v4-8)
#   --zones Z1,Z2,...      zones to ask ($TAE_TPU_ZONES, default us-central2-b)
#   --project P            project (default: gcloud's, or $TAE_GCP_PROJECT)
#   --dry-run              print the gcloud commands instead of running them
#
# Command per zone (deploy/tpu/lib.sh):
#   gcloud compute tpus tpu-vm accelerator-types describe T --zone Z --format=json
# Prints the offering zones, comma-separated, on the last line of stdout (ready for --zones);
# exit status 1 when no zone offers T.
set -euo pipefail
# shellcheck source=deploy/tpu/lib.sh
source "$(dirname "$0")/lib.sh"

while [[ $# -gt 0 ]]; do
  tpu_common_option "$@"
  if [[ $TPU_SHIFT -gt 0 ]]; then shift "$TPU_SHIFT"; continue; fi
  case $1 in
    -h | --help) tpu_usage; exit 0 ;;
    --accelerator-type) tpu_need_value "$@"; TPU_ACCELERATOR=$2; shift ;;
    *) tpu_bad_option "$1" ;;
  esac
  shift
done
mapfile -t zones < <(tpu_zone_list)
if [[ ${#zones[@]} -eq 0 ]]; then tpu_die "no zones given (--zones Z1,Z2)"; fi
tpu_require_tools gcloud

offering=()
for zone in "${zones[@]}"; do
  tpu_cmd_accelerator_describe "$TPU_ACCELERATOR" "$zone"
  if [[ $TPU_DRY_RUN == 1 ]]; then
    tpu_run
  elif tpu_run; then
    echo "$zone: offers $TPU_ACCELERATOR"
    offering+=("$zone")
  elif tpu_not_found; then
    echo "$zone: does not offer $TPU_ACCELERATOR"
  else
    tpu_fail "asking $zone for $TPU_ACCELERATOR"
  fi
done
if [[ $TPU_DRY_RUN == 1 ]]; then exit 0; fi
if [[ ${#offering[@]} -eq 0 ]]; then
  tpu_die "no zone of ${zones[*]} offers $TPU_ACCELERATOR (all zones: gcloud compute tpus locations list)"
fi
(IFS=','; echo "${offering[*]}")
