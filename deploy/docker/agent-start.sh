#!/usr/bin/env bash
# agent-start.sh: the agent container's entrypoint. Starts tae-agent with
#
#   --taed     $TAE_TAED (required), taed's agent link host:port
#   token      $TAE_AGENT_TOKEN, or the file $TAE_AGENT_TOKEN_FILE (e.g. a mounted agent.token)
#   --slots    $TAE_SLOTS (default 1)
#   --labels   accelerator=$TAE_ACCELERATOR (default tpu), slice=SLICE, worker=WORKER, plus
#              $TAE_LABELS (k=v,...)
#   --tls-ca   $TAE_TLS_CA etc. are read by tae-agent itself (needed unless --taed is loopback,
#              e.g. through an ssh tunnel and `docker run --network host`)
#
# SLICE and WORKER come from $TAE_SLICE and $TAE_WORKER; when unset, and on a TPU VM, from the
# GCE metadata server (http://metadata.google.internal, header Metadata-Flavor: Google):
#   instance/attributes/agent-worker-number   the worker's index in the slice: 0, 1, ...
#   instance/attributes/tpu-env               a YAML-like list; its NODE_ID: 'NAME' line is the
#                                             TPU VM's (slice's) name
# Each lookup gives up after 2 s ($TAE_METADATA_TIMEOUT); off a TPU VM the labels fall back to
# slice=$(hostname) and worker=0. Extra arguments are passed on to tae-agent.
set -euo pipefail

metadata_url=${TAE_METADATA_URL:-http://metadata.google.internal/computeMetadata/v1}
metadata_timeout=${TAE_METADATA_TIMEOUT:-2}

metadata() {  # metadata KEY: the value, or nothing (no server, not a TPU VM, timeout)
  if ! command -v curl >/dev/null; then return 0; fi
  curl --silent --fail --max-time "$metadata_timeout" -H 'Metadata-Flavor: Google' \
    "$metadata_url/$1" 2>/dev/null || true
}

if [[ -z ${TAE_TAED:-} ]]; then
  echo "agent-start.sh: set TAE_TAED to taed's agent link address host:port" >&2
  exit 2
fi
if [[ -z ${TAE_AGENT_TOKEN:-} && -n ${TAE_AGENT_TOKEN_FILE:-} ]]; then
  if [[ ! -r $TAE_AGENT_TOKEN_FILE ]]; then
    echo "agent-start.sh: cannot read TAE_AGENT_TOKEN_FILE=$TAE_AGENT_TOKEN_FILE" >&2
    exit 2
  fi
  TAE_AGENT_TOKEN=$(tr -d '[:space:]' <"$TAE_AGENT_TOKEN_FILE")
fi
if [[ -z ${TAE_AGENT_TOKEN:-} ]]; then
  echo "agent-start.sh: set TAE_AGENT_TOKEN, or TAE_AGENT_TOKEN_FILE to a file holding it" \
    "(taed writes it to \$TAE_HOME/agent.token)" >&2
  exit 2
fi
export TAE_AGENT_TOKEN

slice=${TAE_SLICE:-}
worker=${TAE_WORKER:-}
if [[ -z $slice || -z $worker ]]; then
  tpu_env=$(metadata instance/attributes/tpu-env)
  if [[ -z $slice ]]; then
    slice=$(sed -n "s/^NODE_ID: *'\{0,1\}\([^']*\)'\{0,1\} *$/\1/p" <<<"$tpu_env")
  fi
  if [[ -z $worker ]]; then
    worker=$(metadata instance/attributes/agent-worker-number)
  fi
fi
slice=${slice:-$(hostname)}
worker=${worker:-0}
if [[ ! $worker =~ ^[0-9]+$ ]]; then
  echo "agent-start.sh: worker index '$worker' is not a number (TAE_WORKER)" >&2
  exit 2
fi

labels="accelerator=${TAE_ACCELERATOR:-tpu},slice=$slice,worker=$worker${TAE_LABELS:+,$TAE_LABELS}"
echo "agent-start.sh: tae-agent --taed $TAE_TAED --slots ${TAE_SLOTS:-1} --labels $labels"
exec tae-agent --taed "$TAE_TAED" --slots "${TAE_SLOTS:-1}" --labels "$labels" \
  --id "${TAE_AGENT_ID:-$slice-w$worker}" "$@"
