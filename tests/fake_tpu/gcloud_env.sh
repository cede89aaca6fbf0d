#!/bin/sh
# Prepares a throwaway gcloud configuration that talks to the fake Cloud TPU API on loopback.
#
#   gcloud_env.sh DIR PORT [PROJECT]
#
# Creates DIR/gcloud (a CLOUDSDK_CONFIG) and DIR/token (a dummy access token) and prints the
# environment to run gcloud with, one VAR=VALUE a line (today just CLOUDSDK_CONFIG=DIR/gcloud).
# The configuration is exactly what these commands produce (checked with gcloud 528), written
# directly because each gcloud start costs about half a second:
#   gcloud config set core/project PROJECT
#   gcloud config set core/disable_prompts true
#   gcloud config set core/disable_usage_reporting true
#   gcloud config set core/check_gce_metadata false
#   gcloud config set component_manager/disable_update_check true
#   gcloud config set survey/disable_prompts true
#   gcloud config set auth/access_token_file DIR/token
#   gcloud config set api_endpoint_overrides/tpu http://127.0.0.1:PORT/
#   gcloud config set api_endpoint_overrides/compute http://127.0.0.1:PORT/
# (`tpu-vm ssh` reads the project from the Compute API: GET /compute/v1/projects/PROJECT.)
# Because the token file is a property, no --access-token-file flag is needed (passing one too
# is harmless).
set -eu
dir=$1
port=$2
project=${3:-tae-test-project}
mkdir -p "$dir/gcloud/configurations"
printf 'ya29.fake-token-for-tests\n' > "$dir/token"
printf 'default' > "$dir/gcloud/active_config"
cat > "$dir/gcloud/configurations/config_default" <<CONFIG
[core]
project = $project
disable_prompts = true
disable_usage_reporting = true
check_gce_metadata = false

[component_manager]
disable_update_check = true

[survey]
disable_prompts = true

[auth]
access_token_file = $dir/token

[api_endpoint_overrides]
tpu = http://127.0.0.1:$port/
compute = http://127.0.0.1:$port/
CONFIG
echo "CLOUDSDK_CONFIG=$dir/gcloud"
