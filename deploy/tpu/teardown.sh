#!/usr/bin/env bash
# teardown.sh [options]: deletes every TPU VM carrying the label tae=1 ($TAE_TPU_LABEL), or the
# one given with --name, and the queued resources that hold such VMs, in every zone given; with
# --all also the bucket and the Artifact Registry repository of the agent image. Prints what it
# will delete and asks first, unless --yes.
#
#   --zones Z1,Z2,...      zones to clean ($TAE_TPU_ZONES, default us-central2-b)
#   --name NAME            only the TPU VM (or queued resource) NAME, labelled or not
#   --label k=v            the label to delete by (default tae=1)
#   --all                  also the bucket (--bucket or $TAE_TPU_BUCKET, with every object in it)
#                          and the repository (--repository/$TAE_TPU_REPOSITORY in
#                          --region/$TAE_TPU_REGION, with every image in it)
#   --bucket NAME, --repository NAME, --region REGION    for --all
#   --yes                  do not ask
#   --project P            project (default: gcloud's, or $TAE_GCP_PROJECT)
#   --dry-run              print the gcloud commands instead of running them
#
# Commands (deploy/tpu/lib.sh):
#   gcloud compute tpus tpu-vm list --zone Z --format=json
#   gcloud compute tpus queued-resources list --zone Z --format=json
#   gcloud compute tpus queued-resources delete Q --zone Z --force --quiet
#   gcloud compute tpus tpu-vm delete NAME --zone Z --quiet
#   gcloud storage rm --recursive gs://BUCKET
#   gcloud artifacts repositories delete REPOSITORY --location REGION --quiet
# At the end it lists the zones again and fails if a matching TPU VM is left.
set -euo pipefail
# shellcheck source=deploy/tpu/lib.sh
source "$(dirname "$0")/lib.sh"

name=""
all=0
yes=0
while [[ $# -gt 0 ]]; do
  tpu_common_option "$@"
  if [[ $TPU_SHIFT -gt 0 ]]; then shift "$TPU_SHIFT"; continue; fi
  case $1 in
    -h | --help) tpu_usage; exit 0 ;;
    --name) tpu_need_value "$@"; name=$2; shift ;;
    --label) tpu_need_value "$@"; TPU_LABEL=$2; shift ;;
    --all) all=1 ;;
    --bucket) tpu_need_value "$@"; TPU_BUCKET=$2; shift ;;
    --repository) tpu_need_value "$@"; TPU_REPOSITORY=$2; shift ;;
    --region) tpu_need_value "$@"; TPU_REGION=$2; shift ;;
    --yes | -y) yes=1 ;;
    *) tpu_bad_option "$1" ;;
  esac
  shift
done
if [[ ! $TPU_LABEL =~ ^[^=]+=[^=]+$ ]]; then tpu_die "--label: '$TPU_LABEL' is not key=value"; fi
if [[ $all == 1 && -z $TPU_BUCKET ]]; then
  tpu_die "--all needs the bucket's name: --bucket NAME (or TAE_TPU_BUCKET)"
fi
mapfile -t zones < <(tpu_zone_list)
if [[ ${#zones[@]} -eq 0 ]]; then tpu_die "no zones given (--zones Z1,Z2)"; fi
tpu_require_tools gcloud python3
what=${name:-every TPU VM labelled $TPU_LABEL}

if [[ $TPU_DRY_RUN == 1 ]]; then
  for zone in "${zones[@]}"; do
    tpu_cmd_queued_list "$zone"
    tpu_run
    tpu_cmd_list "$zone"
    tpu_run
    echo "# for each queued resource holding $what:"
    tpu_cmd_queued_delete QUEUED_RESOURCE "$zone"
    tpu_run
    echo "# for $what left:"
    tpu_cmd_delete "${name:-NAME}" "$zone"
    tpu_run
  done
  if [[ $all == 1 ]]; then
    tpu_cmd_bucket_delete "$TPU_BUCKET"
    tpu_run
    tpu_cmd_repository_delete "$TPU_REPOSITORY" "$TPU_REGION"
    tpu_run
  fi
  exit 0
fi

# 1. What there is to delete: "ZONE ID STATE" lines.
queued=()
vms=()
for zone in "${zones[@]}"; do
  tpu_cmd_queued_list "$zone"
  if ! tpu_run; then tpu_fail "listing the queued resources in $zone"; fi
  mapfile -t found < <(tpu_json_queued "$TPU_OUT" "$TPU_LABEL" "$name")
  held=" "
  for line in "${found[@]}"; do
    queued+=("$zone $line")
    held+="${line%% *} "
  done
  tpu_cmd_list "$zone"
  if ! tpu_run; then tpu_fail "listing the TPU VMs in $zone"; fi
  while read -r vm state qr; do
    # A VM its queued resource holds goes with the queued resource (--force).
    if [[ $held == *" $qr "* ]]; then continue; fi
    vms+=("$zone $vm $state")
  done < <(tpu_json_nodes "$TPU_OUT" "$TPU_LABEL" "$name")
done

if [[ ${#queued[@]} -eq 0 && ${#vms[@]} -eq 0 && $all == 0 ]]; then
  echo "nothing to delete: no TPU VM or queued resource matching $what in ${zones[*]}"
  exit 0
fi
echo "to delete:"
for line in "${queued[@]}"; do
  read -r zone id state <<<"$line"
  echo "  queued resource $id in $zone ($state), with its TPU VMs"
done
for line in "${vms[@]}"; do
  read -r zone vm state <<<"$line"
  echo "  TPU VM $vm in $zone ($state)"
done
if [[ $all == 1 ]]; then
  echo "  bucket gs://$TPU_BUCKET and every object in it"
  echo "  Artifact Registry repository $TPU_REPOSITORY in $TPU_REGION and every image in it"
fi
if [[ $yes == 0 ]]; then
  if [[ ! -t 0 ]]; then tpu_die "not asking without a terminal: pass --yes to delete the above"; fi
  read -r -p "delete these? [y/N] " answer
  if [[ $answer != y && $answer != Y && $answer != yes ]]; then
    echo "nothing deleted"
    exit 1
  fi
fi

# 2. Delete: queued resources first (they would recreate their VMs), then the VMs.
for line in "${queued[@]}"; do
  read -r zone id state <<<"$line"
  tpu_cmd_queued_delete "$id" "$zone"
  if ! tpu_run_shown && ! tpu_not_found; then tpu_fail "deleting queued resource $id"; fi
  echo "deleted queued resource $id in $zone"
done
for line in "${vms[@]}"; do
  read -r zone vm state <<<"$line"
  tpu_cmd_delete "$vm" "$zone"
  if ! tpu_run_shown && ! tpu_not_found; then tpu_fail "deleting TPU VM $vm"; fi
  echo "deleted TPU VM $vm in $zone"
done
if [[ $all == 1 ]]; then
  tpu_cmd_bucket_delete "$TPU_BUCKET"
  if tpu_run_shown; then
    echo "deleted bucket gs://$TPU_BUCKET"
  elif tpu_not_found; then
    echo "bucket gs://$TPU_BUCKET: already gone"
  else
    tpu_fail "deleting bucket gs://$TPU_BUCKET"
  fi
  tpu_cmd_repository_delete "$TPU_REPOSITORY" "$TPU_REGION"
  if tpu_run_shown; then
    echo "deleted repository $TPU_REPOSITORY in $TPU_REGION"
  elif tpu_not_found; then
    echo "repository $TPU_REPOSITORY in $TPU_REGION: already gone"
  else
    tpu_fail "deleting repository $TPU_REPOSITORY"
  fi
fi

# 3. Check: nothing matching is left.
left=0
for zone in "${zones[@]}"; do
  tpu_cmd_list "$zone"
  if ! tpu_run; then tpu_fail "listing the TPU VMs in $zone"; fi
  while read -r vm state _; do
    echo "still there: TPU VM $vm in $zone ($state)" >&2
    left=1
  done < <(tpu_json_nodes "$TPU_OUT" "$TPU_LABEL" "$name")
done
if [[ $left == 1 ]]; then tpu_die "some TPU VMs are left; run $TPU_SCRIPT again or delete them by hand"; fi
echo "done: no TPU VM matching $what is left in ${zones[*]}"
