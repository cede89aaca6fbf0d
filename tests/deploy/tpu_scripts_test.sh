#!/usr/bin/env bash
# The deploy/tpu scripts, run with the real gcloud CLI against the fake Cloud TPU v2 API
# (tests/fake_tpu/fake_tpu.py) on a free loopback port. Checks what the scripts print and exit
# with, and what gcloud sent (the fake's recorded requests). Exits 77 (skipped) without gcloud or
# python3.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tpu=$root/deploy/tpu
project=tae-test-project
z1=us-east5-a      # no capacity at first
z2=us-central2-b

for tool in gcloud python3; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool is not on PATH (the test drives the real gcloud against a python3 fake)"
    exit 77
  fi
done

work=$(mktemp -d)
fake_pid=""
cleanup() {
  if [[ -n $fake_pid ]]; then
    kill "$fake_pid" 2>/dev/null || true
    wait "$fake_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

failures=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
check() {  # check DESCRIPTION COMMAND...: passes when COMMAND succeeds (else shows COMMAND)
  local what=$1
  shift
  if "$@"; then pass "$what"; else fail "$what: $*"; fi
}

# run NAME SCRIPT ARGS...: runs a deploy/tpu script; its stdout, stderr and status in
# $work/NAME.{out,err,rc}.
run() {
  local name=$1 script=$2
  shift 2
  local rc=0
  bash "$tpu/$script" "$@" >"$work/$name.out" 2>"$work/$name.err" </dev/null || rc=$?
  echo "$rc" >"$work/$name.rc"
}
rc() { cat "$work/$1.rc"; }
has() { grep -qF -- "$2" "$work/$1"; }  # has FILE TEXT
show() {  # show NAME: a failed step's output, for the log
  echo "--- $1 (exit $(rc "$1")) stdout:"; cat "$work/$1.out"
  echo "--- $1 stderr:"; cat "$work/$1.err"
}

# The fake's /_control endpoints.
control() {  # control METHOD WHAT [JSON]: prints the JSON answer
  python3 - "$port" "$@" <<'PY'
import sys, urllib.request
port, method, what = sys.argv[1:4]
data = sys.argv[4].encode() if len(sys.argv) > 4 else None
req = urllib.request.Request("http://127.0.0.1:%s/_control/%s" % (port, what), data=data,
                             method=method, headers={"Content-Type": "application/json"})
print(urllib.request.urlopen(req, timeout=10).read().decode())
PY
}
# jq_py EXPR: evaluates a Python expression over the JSON on stdin (as `d`); prints the result.
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# --- start the fake on a free port and wait for it (deadline, no fixed sleep) ---
python3 "$root/tests/fake_tpu/fake_tpu.py" --port 0 --port-file "$work/port" \
  >"$work/fake.log" 2>&1 &
fake_pid=$!
deadline=$((SECONDS + 30))
until [[ -s $work/port && $(tail -c 1 "$work/port" | od -An -c | tr -d ' ') == '\n' ]]; do
  if ! kill -0 "$fake_pid" 2>/dev/null; then cat "$work/fake.log"; echo "FAIL fake_tpu.py exited"; exit 1; fi
  if [[ $SECONDS -ge $deadline ]]; then echo "FAIL fake_tpu.py did not start in 30 s"; exit 1; fi
  sleep 0.05
done
port=$(cat "$work/port")
while IFS= read -r line; do export "${line?}"; done < <(sh "$root/tests/fake_tpu/gcloud_env.sh" "$work" "$port" "$project")
export TAE_TPU_ZONES=$z1,$z2
unset TAE_GCP_PROJECT TAE_TPU_LABEL TAE_TPU_ACCELERATOR TAE_TPU_VERSION
echo "fake Cloud TPU API on 127.0.0.1:$port, CLOUDSDK_CONFIG=$CLOUDSDK_CONFIG"
started=$SECONDS

# --- --dry-run prints the commands and sends nothing ---
control POST clear_requests >/dev/null
run dry_create create.sh tae-dry --dry-run --spot
run dry_verify verify.sh tae-dry --dry-run
run dry_teardown teardown.sh --dry-run --all --bucket tae-test-bucket
run dry_check check-zones.sh --dry-run
check "dry runs exit 0" test "$(rc dry_create)$(rc dry_verify)$(rc dry_teardown)$(rc dry_check)" = 0000
check "create --dry-run prints the create for each zone in order" \
  has dry_create.out "gcloud compute tpus tpu-vm create tae-dry --zone $z1 --accelerator-type v4-8 --version tpu-ubuntu2204-base --spot --labels tae=1"
check "create --dry-run prints the fall-over zone" has dry_create.out "create tae-dry --zone $z2 "
check "verify --dry-run prints the ssh to every worker" has dry_verify.out "--worker=all --command"
check "teardown --dry-run prints the deletes" has dry_teardown.out "gcloud compute tpus tpu-vm delete NAME --zone $z2 --quiet"
check "teardown --dry-run prints the queued-resource delete" \
  has dry_teardown.out "gcloud compute tpus queued-resources delete QUEUED_RESOURCE --zone $z1 --force --quiet"
check "dry runs sent no request" test "$(control GET requests | jq_py 'len(d)')" = 0

# --- create falls over to the second zone when the first has no capacity ---
control POST no_capacity "{\"zone\": \"$z1\"}" >/dev/null
run create1 create.sh tae-t1 --labels study=s1
if [[ $(rc create1) == 0 ]]; then pass "create.sh exits 0"; else fail "create.sh exits 0"; show create1; fi
check "create.sh prints NAME ZONE with the second zone" test "$(tail -n 1 "$work/create1.out")" = "tae-t1 $z2"
check "create.sh says the first zone had no capacity" has create1.err "no capacity for v4-8 in $z1"
creates=$(control GET requests | jq_py \
  "[(r['path'].split('/')[5], r['query'].get('nodeId'), sorted(((r['body'] or {}).get('labels') or {}).items())) for r in d if r['method'] == 'POST' and r['path'].endswith('/nodes')]")
check "the creates went to $z1 then $z2, with the labels" test "$creates" = \
  "[('$z1', 'tae-t1', [('study', 's1'), ('tae', '1')]), ('$z2', 'tae-t1', [('study', 's1'), ('tae', '1')])]"
state=$(control GET nodes | jq_py "[(n['zone'], n['name'].split('/')[-1], n['state']) for n in d]")
check "the VM is READY in $z2 and nowhere else" test "$state" = "[('$z2', 'tae-t1', 'READY')]"
check "create.sh polled describe" test "$(control GET requests | jq_py \
  "sum(1 for r in d if r['method'] == 'GET' and r['path'].endswith('/$z2/nodes/tae-t1'))")" -ge 1

# Capacity back in z1: a second labelled VM lands there; an unlabelled one and a labelled queued
# resource are made with gcloud directly.
control POST capacity "{\"zone\": \"$z1\"}" >/dev/null
run create2 create.sh tae-t2 --spot
check "a second create lands in $z1" test "$(tail -n 1 "$work/create2.out")" = "tae-t2 $z1"
if [[ $(rc create2) != 0 ]]; then show create2; fi
gcloud compute tpus tpu-vm create other --zone "$z2" --accelerator-type v4-8 \
  --version tpu-ubuntu2204-base >/dev/null 2>&1
gcloud compute tpus queued-resources create tae-q --node-id tae-qn --zone "$z2" \
  --accelerator-type v4-8 --runtime-version tpu-ubuntu2204-base --labels tae=1 >/dev/null 2>&1
check "set-up: four VMs" test "$(control GET nodes | jq_py 'len(d)')" = 4

# --- verify ---
run verify1 verify.sh tae-t1 --no-ssh
if [[ $(rc verify1) == 0 ]]; then pass "verify.sh --no-ssh passes"; else fail "verify.sh --no-ssh passes"; show verify1; fi
check "verify.sh shows READY and the worker's IP" grep -qE "^  0 10\.[0-9.]+ " "$work/verify1.out"
check "verify.sh names the zone" has verify1.out "tae-t1 in $z2: READY"
run verify_missing verify.sh tae-nope --no-ssh
check "verify.sh fails for a missing VM" test "$(rc verify_missing)" = 1
check "... naming it and the zones" has verify_missing.err "FAIL: no TPU VM tae-nope in $z1 $z2"
control POST preempt "{\"zone\": \"$z1\", \"node\": \"tae-t2\"}" >/dev/null
run verify_preempted verify.sh tae-t2 --no-ssh
check "verify.sh fails for a PREEMPTED VM" test "$(rc verify_preempted)" = 1
check "... saying so" has verify_preempted.err "is PREEMPTED, not READY"

# --- check-zones ---
run zones check-zones.sh --accelerator-type v4-8
check "check-zones.sh lists both zones" test "$(tail -n 1 "$work/zones.out")" = "$z1,$z2"
run zones_none check-zones.sh --accelerator-type v3-8
check "check-zones.sh fails when no zone offers the type" test "$(rc zones_none)" = 1
check "... and asked the API in each zone" test "$(control GET requests | jq_py \
  "sum(1 for r in d if r['path'].endswith('/acceleratorTypes/v3-8'))")" = 2
check "... saying which zones do not" has zones_none.out "$z1: does not offer v3-8"

# --- teardown ---
run teardown_ask teardown.sh
check "teardown.sh without --yes and without a terminal refuses" test "$(rc teardown_ask)" = 1
check "... after listing what it would delete" has teardown_ask.out "TPU VM tae-t1 in $z2 (READY)"
check "... and deletes nothing" test "$(control GET nodes | jq_py 'len(d)')" = 4
control POST clear_requests >/dev/null
run teardown teardown.sh --yes
if [[ $(rc teardown) == 0 ]]; then pass "teardown.sh --yes exits 0"; else fail "teardown.sh --yes exits 0"; show teardown; fi
check "teardown.sh prints the queued resource" has teardown.out "queued resource tae-q in $z2 (ACTIVE)"
check "teardown.sh prints the preempted VM" has teardown.out "TPU VM tae-t2 in $z1 (PREEMPTED)"
deletes=$(control GET requests | jq_py \
  "sorted((r['path'].split('/')[5], r['path'].split('/')[-1], r['query'].get('force')) for r in d if r['method'] == 'DELETE')")
check "exactly the labelled VMs and the queued resource were deleted (force)" test "$deletes" = \
  "[('$z2', 'tae-q', 'True'), ('$z2', 'tae-t1', None), ('$z1', 'tae-t2', None)]"
left=$(control GET nodes | jq_py "[n['name'].split('/')[-1] for n in d]")
check "only the unlabelled VM is left" test "$left" = "['other']"
check "teardown.sh checked nothing is left" has teardown.out "done: no TPU VM matching"
run teardown_again teardown.sh --yes
check "a second teardown has nothing to delete" has teardown_again.out "nothing to delete"
run teardown_name teardown.sh --yes --name other --zones "$z2"
check "teardown.sh --name deletes an unlabelled VM by name" test "$(control GET nodes | jq_py 'len(d)')" = 0

# --- errors name the fix ---
run bad_name create.sh Bad_Name
check "create.sh refuses an invalid name" has bad_name.err "is not a valid TPU VM name"
run no_name verify.sh
check "verify.sh without a name says so" has no_name.err "no TPU VM name given"

echo "$((SECONDS - started)) s of gcloud calls; $failures failure(s)"
if [[ $failures -gt 0 ]]; then
  echo "fake_tpu.py log:"; cat "$work/fake.log"
  exit 1
fi
echo "PASS"
