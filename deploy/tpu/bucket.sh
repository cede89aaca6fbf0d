#!/usr/bin/env bash
# bucket.sh NAME [options]: creates the Cloud Storage bucket gs://NAME for experiment data and
# results (uniform bucket-level access). An existing bucket you own is reused.
#
#   --location L     region of the bucket; keep it in the TPU VMs' region, so that reads are
#                    free and fast ($TAE_TPU_REGION, default us-central2)
#   --project P      project (default: gcloud's, or $TAE_GCP_PROJECT)
#   --dry-run        print the gcloud command instead of running it
#
# Command (deploy/tpu/lib.sh):
#   gcloud storage buckets create gs://NAME --location L --uniform-bucket-level-access
# Bucket names are global: when NAME is taken by someone else, pick another.
set -euo pipefail
# shellcheck source=deploy/tpu/lib.sh
source "$(dirname "$0")/lib.sh"

name=${TAE_TPU_BUCKET:-}
given=""
while [[ $# -gt 0 ]]; do
  tpu_common_option "$@"
  if [[ $TPU_SHIFT -gt 0 ]]; then shift "$TPU_SHIFT"; continue; fi
  case $1 in
    -h | --help) tpu_usage; exit 0 ;;
    --location) tpu_need_value "$@"; TPU_REGION=$2; shift ;;
    -*) tpu_bad_option "$1" ;;
    *) if [[ -n $given ]]; then tpu_bad_option "$1"; fi; given=$1 ;;
  esac
  shift
done
name=${given:-$name}
name=${name#gs://}
if [[ -z $name ]]; then tpu_die "no bucket name given (usage: $TPU_SCRIPT NAME [--location L])"; fi
if [[ ! $name =~ ^[a-z0-9][-_.a-z0-9]{1,61}[a-z0-9]$ ]]; then
  tpu_die "'$name' is not a valid bucket name: 3-63 lower-case letters, digits, '-', '_', '.'"
fi
tpu_require_tools gcloud

tpu_cmd_bucket_create "$name" "$TPU_REGION"
if tpu_run_shown; then
  if [[ $TPU_DRY_RUN == 0 ]]; then echo "created gs://$name in $TPU_REGION"; fi
elif grep -qiE 'already own' "$TPU_ERR"; then
  echo "gs://$name exists and is yours: reusing it"
elif tpu_already_exists; then
  tpu_die "the bucket name $name is taken (bucket names are global): choose another NAME"
else
  tpu_fail "creating gs://$name"
fi
