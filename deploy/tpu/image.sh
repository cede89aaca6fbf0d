#!/usr/bin/env bash
# image.sh [options]: builds the agent's container image (deploy/docker/Dockerfile) and pushes
# it to Artifact Registry, creating the Docker repository first when it does not exist.
#
#   --base-image IMG    base of the image, e.g. a TPU VM's OS image (default debian:12)
#   --region R          Artifact Registry region ($TAE_TPU_REGION, default us-central2)
#   --repository NAME   repository ($TAE_TPU_REPOSITORY, default tae)
#   --tag T             image tag (default: the git commit, else "latest")
#   --no-push           build only
#   --project P         project (default: gcloud's, or $TAE_GCP_PROJECT)
#   --dry-run           print the commands instead of running them
#
# Commands (deploy/tpu/lib.sh):
#   gcloud artifacts repositories describe NAME --location R --format=json
#   gcloud artifacts repositories create NAME --repository-format=docker --location R ...
#   gcloud auth configure-docker R-docker.pkg.dev --quiet
#   docker build --build-arg BASE_IMAGE=IMG -f deploy/docker/Dockerfile -t IMAGE .
#   docker push IMAGE          where IMAGE is R-docker.pkg.dev/PROJECT/NAME/tae-agent:T
# Prints IMAGE on the last line of stdout.
set -euo pipefail
# shellcheck source=deploy/tpu/lib.sh
source "$(dirname "$0")/lib.sh"

base_image=debian:12
tag=""
push=1
while [[ $# -gt 0 ]]; do
  tpu_common_option "$@"
  if [[ $TPU_SHIFT -gt 0 ]]; then shift "$TPU_SHIFT"; continue; fi
  case $1 in
    -h | --help) tpu_usage; exit 0 ;;
    --base-image) tpu_need_value "$@"; base_image=$2; shift ;;
    --region) tpu_need_value "$@"; TPU_REGION=$2; shift ;;
    --repository) tpu_need_value "$@"; TPU_REPOSITORY=$2; shift ;;
    --tag) tpu_need_value "$@"; tag=$2; shift ;;
    --no-push) push=0 ;;
    *) tpu_bad_option "$1" ;;
  esac
  shift
done
tpu_require_tools gcloud docker
if [[ -z $tag ]]; then
  tag=$(git -C "$TPU_REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo latest)
fi
project=$TPU_PROJECT
if [[ -z $project ]]; then
  tpu_cmd_project_get
  if command -v gcloud >/dev/null; then project=$("${CMD[@]}" 2>/dev/null || true); fi
  if [[ -z $project ]]; then
    if [[ $TPU_DRY_RUN == 0 ]]; then
      tpu_die "no project: run  gcloud config set project PROJECT  (or pass --project PROJECT)"
    fi
    project=PROJECT
  fi
fi
image=$(tpu_image_name "$TPU_REGION" "$project" "$TPU_REPOSITORY" "$tag")

if [[ $push == 1 ]]; then
  tpu_cmd_repository_describe "$TPU_REPOSITORY" "$TPU_REGION"
  if [[ $TPU_DRY_RUN == 1 ]]; then
    tpu_run
    echo "# only if it does not exist:"
  fi
  if [[ $TPU_DRY_RUN == 1 ]] || ! tpu_run; then
    if [[ $TPU_DRY_RUN == 0 ]] && ! tpu_not_found; then
      tpu_fail "looking for repository $TPU_REPOSITORY in $TPU_REGION"
    fi
    tpu_cmd_repository_create "$TPU_REPOSITORY" "$TPU_REGION"
    if ! tpu_run_shown; then tpu_fail "creating repository $TPU_REPOSITORY"; fi
  fi
  tpu_cmd_configure_docker "$TPU_REGION"
  if ! tpu_run_shown; then tpu_fail "letting docker log in to $TPU_REGION-docker.pkg.dev"; fi
fi

# docker's own progress goes straight to the terminal.
tpu_cmd_docker_build "$image" "$base_image"
if [[ $TPU_DRY_RUN == 1 ]]; then
  tpu_run
else
  tpu_note "running: $(tpu_quote "${CMD[@]}")"
  "${CMD[@]}" >&2 || tpu_die "docker build failed (is the docker daemon running? sudo systemctl start docker)"
fi
if [[ $push == 1 ]]; then
  tpu_cmd_docker_push "$image"
  if [[ $TPU_DRY_RUN == 1 ]]; then
    tpu_run
  else
    tpu_note "running: $(tpu_quote "${CMD[@]}")"
    "${CMD[@]}" >&2 || tpu_die "docker push failed; run  gcloud auth login  and" \
      "gcloud auth configure-docker $TPU_REGION-docker.pkg.dev, then try again"
  fi
fi
echo "$image"
