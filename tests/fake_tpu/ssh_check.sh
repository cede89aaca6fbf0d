#!/usr/bin/env bash
# `gcloud compute tpus tpu-vm ssh` for real, against the fake Cloud TPU API (fake_tpu.py): two
# "workers" are network namespaces running Debian's sshd, the fake maps a node's two workers to
# them and, like the guest agent, writes the keys gcloud puts in the node's metadata ssh-keys
# into their authorized_keys. Checks:
#   1. --worker=all --command 'hostname -I' reaches both workers (and records what gcloud asked
#      the API and which files it wrote under a throwaway HOME);
#   2. --worker=0 --command cat: stdin reaches the remote command; host keys are now pinned, so
#      --strict-host-key-checking=yes works (and a wrong pinned key is refused);
#   3. --worker=1 -- -N -R 127.0.0.1:RPORT:127.0.0.1:PORT: the reverse tunnel works (a client
#      inside the namespace reaches a server on the host's loopback);
#   4. the shape the gcloud-tpu provider uses: a long-lived session per worker, a token on stdin,
#      a -R tunnel, the remote command connecting back through it with the token.
# Exit 0 when all pass, 1 on a failure, 77 (skipped) when not root or gcloud/sshd/ip is missing.
#   SSH_CHECK_STRACE=1  also strace the first gcloud ssh, listing the files it opens/creates.
#   SSH_CHECK_KEEP=1    keep the work directory (printed) for a look afterwards.
#   SSH_CHECK_SLOW=1    also check that a wrong pinned host key is refused (about 50 s: gcloud
#                       retries a failed ssh 10 times, 5 s apart).
#   SSH_CHECK_EXTRA=F   source F (bash) before cleaning up, with everything still up: $node,
#                       $zone, $work, $ip0, $ip1, $port, HOME and CLOUDSDK_CONFIG set.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
zone=us-central2-b
node=ssh-node

if [[ $(id -u) != 0 ]]; then echo "SKIP: needs root (network namespaces, sshd)"; exit 77; fi
for tool in gcloud python3 ssh ssh-keygen /usr/sbin/sshd ip timeout setsid; do
  if ! command -v "$tool" >/dev/null; then echo "SKIP: $tool is not available"; exit 77; fi
done

t0=$SECONDS
work=$(mktemp -d /tmp/tae-ssh-check.XXXXXX)
chmod 755 "$work"
id=$(($$ % 10000))
sub=$(($$ % 100 * 2 + 20))   # worker i: 10.236.(sub+i).2, host side .1
fake_pid=""
bg_pids=()
netns=()
cleanup() {
  set +e
  for pid in "${bg_pids[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null; done
  [[ -n ${SSH_CHECK_EXTRA:-} ]] && source "$SSH_CHECK_EXTRA"
  for i in 0 1; do
    [[ -s $work/w$i/sshd.pid ]] && kill "$(cat "$work/w$i/sshd.pid")" 2>/dev/null
  done
  if [[ -n $fake_pid ]]; then kill "$fake_pid" 2>/dev/null; wait "$fake_pid" 2>/dev/null; fi
  for pid in "${bg_pids[@]}"; do wait "$pid" 2>/dev/null; done
  for ns in "${netns[@]}"; do
    ip link del "${ns}h" 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  if [[ ${SSH_CHECK_KEEP:-} == 1 ]]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

failures=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$@"; }

# --- two workers: a netns each, a veth to the host, sshd with its own host key ---
mkdir -p /run/sshd  # sshd's privilege separation directory
for i in 0 1; do
  ns=taeg${id}w$i
  ip netns add "$ns"
  netns+=("$ns")
  ip link add "${ns}h" type veth peer name "${ns}n"
  ip link set "${ns}n" netns "$ns"
  ip addr add "10.236.$((sub + i)).1/24" dev "${ns}h"
  ip link set "${ns}h" up
  ip -n "$ns" addr add "10.236.$((sub + i)).2/24" dev "${ns}n"
  ip -n "$ns" link set "${ns}n" up
  ip -n "$ns" link set lo up
  w=$work/w$i
  mkdir -p "$w"
  ssh-keygen -q -t ed25519 -N "" -C "worker$i" -f "$w/host_key"
  cat >"$w/sshd_config" <<EOF
ListenAddress 10.236.$((sub + i)).2
HostKey $w/host_key
PidFile $w/sshd.pid
AuthorizedKeysFile $w/authorized_keys.%u
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowTcpForwarding yes
EOF
  ip netns exec "$ns" /usr/sbin/sshd -e -f "$w/sshd_config" -E "$w/sshd.log"  # daemonizes
done
ip0=10.236.$sub.2
ip1=10.236.$((sub + 1)).2
for i in 0 1; do
  deadline=$((SECONDS + 20))
  until [[ -s $work/w$i/sshd.pid ]]; do
    if [[ $SECONDS -ge $deadline ]]; then cat "$work/w$i/sshd.log"; echo "FAIL sshd $i did not start"; exit 1; fi
    sleep 0.05
  done
done

# --- the fake and a gcloud configuration pointing at it; a throwaway HOME ---
python3 "$here/fake_tpu.py" --port 0 --port-file "$work/port" >"$work/fake.log" 2>&1 &
fake_pid=$!
deadline=$((SECONDS + 30))
until [[ -s $work/port && $(tail -c 1 "$work/port" | od -An -c | tr -d ' ') == '\n' ]]; do
  if ! kill -0 "$fake_pid" 2>/dev/null; then cat "$work/fake.log"; echo "FAIL fake_tpu.py exited"; exit 1; fi
  if [[ $SECONDS -ge $deadline ]]; then echo "FAIL fake_tpu.py did not start"; exit 1; fi
  sleep 0.05
done
port=$(cat "$work/port")
export "$(sh "$here/gcloud_env.sh" "$work" "$port")"   # CLOUDSDK_CONFIG
export HOME=$work/home
mkdir -p "$HOME"
unset SSH_AUTH_SOCK SSH_AGENT_PID

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
# requests_summary: the API requests since the last clear_requests, one a line.
requests_summary() {
  control GET requests | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    q = "&".join("%s=%s" % kv for kv in sorted(r["query"].items()))
    body = json.dumps(r["body"], sort_keys=True) if r["body"] is not None else ""
    print("  %s %s%s %s" % (r["method"], r["path"], "?" + q if q else "", body[:300]))'
}

# g NAME ARGS...: runs gcloud ARGS (60 s limit, stdin from $work/NAME.in or /dev/null); stdout,
# stderr, status, seconds in $work/NAME.{out,err,rc,sec}.
g() {
  local name=$1 rc=0 start
  shift
  local in=/dev/null
  [[ -f $work/$name.in ]] && in=$work/$name.in
  start=$(now)
  timeout 60 gcloud "$@" <"$in" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  echo "$rc" >"$work/$name.rc"
  elapsed "$start" "$(now)" >"$work/$name.sec"
}
show() {
  echo "--- $1 (exit $(cat "$work/$1.rc"), $(cat "$work/$1.sec") s) stdout:"; cat "$work/$1.out"
  echo "--- $1 stderr:"; cat "$work/$1.err"
}

g create compute tpus tpu-vm create "$node" --zone "$zone" --accelerator-type v4-16 \
  --version tpu-ubuntu2204-base
if [[ $(cat "$work/create.rc") != 0 ]]; then show create; echo "FAIL create"; exit 1; fi
pass "tpu-vm create ($(cat "$work/create.sec") s)"
control POST workers "$(python3 - "$zone" "$node" "$ip0" "$ip1" "$work" <<'PY'
import json, sys
zone, node, ip0, ip1, work = sys.argv[1:]
print(json.dumps({"zone": zone, "node": node, "workers": [
    {"ip": ip, "host_key": open("%s/w%d/host_key.pub" % (work, i)).read().strip(),
     "authorized_keys": "%s/w%d/authorized_keys.%%u" % (work, i)}
    for i, ip in enumerate((ip0, ip1))]}))
PY
)" >/dev/null
node_id=$(control GET nodes | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
control POST clear_requests >/dev/null

# --- 1. --worker=all: both workers answer ---
cmd1=(compute tpus tpu-vm ssh "$node" --zone "$zone" --worker=all --command 'hostname -I')
if [[ ${SSH_CHECK_STRACE:-} == 1 ]] && command -v strace >/dev/null; then
  start=$(now)
  rc=0
  timeout 60 strace -f -qq -e trace=openat,creat,rename,unlink,mkdir,chmod,execve \
    -o "$work/strace.log" gcloud "${cmd1[@]}" </dev/null >"$work/all.out" 2>"$work/all.err" || rc=$?
  echo "$rc" >"$work/all.rc"
  elapsed "$start" "$(now)" >"$work/all.sec"
  echo "  files under HOME and CLOUDSDK_CONFIG that gcloud opened for writing or created, and execs:"
  grep -E "execve\(|(O_WRONLY|O_RDWR|O_CREAT|rename|unlink|mkdir|chmod)" "$work/strace.log" \
    | grep -E "execve\(|$work" | grep -v ENOENT | sed -E 's/^[0-9]+ +//' \
    | sed -E 's/(execve\("[^"]*", \[[^]]{0,400}).*/\1/' | sort -u | sed 's/^/    /'
else
  g all "${cmd1[@]}"
fi
if [[ $(cat "$work/all.rc") == 0 ]] && grep -qw "$ip0" "$work/all.out" && grep -qw "$ip1" "$work/all.out"; then
  pass "ssh --worker=all --command 'hostname -I': both workers ($(cat "$work/all.sec") s)"
else
  fail "ssh --worker=all"; show all
  for i in 0 1; do echo "--- sshd $i log:"; cat "$work/w$i/sshd.log"; done
fi
echo "  API requests made by that gcloud ssh:"
requests_summary | tee "$work/requests_all.txt"
echo "  files in HOME afterwards:"
(cd "$HOME" && find . -type f | sort | sed 's/^/    /')
user=$(id -un)
if grep -q "^$user:ssh-rsa " <(control GET nodes | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["metadata"]["ssh-keys"])') \
   && cmp -s <(cut -d' ' -f1,2 "$HOME/.ssh/google_compute_engine.pub") <(cut -d' ' -f1,2 "$work/w0/authorized_keys.$user"); then
  pass "gcloud's key went through nodes.patch metadata ssh-keys into the workers' authorized_keys"
else
  fail "key flow: metadata ssh-keys / authorized_keys.$user do not hold ~/.ssh/google_compute_engine.pub"
fi
suffix0=$(awk '{print substr($2, length($2) - 5)}' "$work/w0/host_key.pub")
# ssh lowercases HostKeyAlias before writing it, so the entry is tpu.ID-0-<suffix in lower case>.
if grep -qi "^tpu.$node_id-0-$suffix0 ssh-ed25519 " "$HOME/.ssh/google_compute_known_hosts" 2>/dev/null; then
  pass "google_compute_known_hosts pins worker 0 as tpu.$node_id-0-${suffix0,,}"
else
  fail "google_compute_known_hosts lacks tpu.$node_id-0-$suffix0"; cat "$HOME/.ssh/google_compute_known_hosts" 2>/dev/null
fi

# --- 2. stdin reaches the remote command; strict host key checking against the pinned keys ---
control POST clear_requests >/dev/null
printf 'line one from stdin\nline two\n' >"$work/cat.in"
g cat compute tpus tpu-vm ssh "$node" --zone "$zone" --worker=0 --strict-host-key-checking=yes \
  --command cat
if [[ $(cat "$work/cat.rc") == 0 ]] && cmp -s "$work/cat.in" "$work/cat.out"; then
  pass "ssh --worker=0 --strict-host-key-checking=yes --command cat: stdin came back ($(cat "$work/cat.sec") s)"
else
  fail "ssh --worker=0 --command cat"; show cat
fi
echo "  API requests made by that gcloud ssh (key already in metadata):"
requests_summary | tee "$work/requests_cat.txt"
if grep -q "PATCH" "$work/requests_cat.txt"; then fail "second ssh patched the node again"; fi
# The remote command's exit status is gcloud's.
g exit3 compute tpus tpu-vm ssh "$node" --zone "$zone" --worker=1 --strict-host-key-checking=yes \
  --command 'exit 3'
if [[ $(cat "$work/exit3.rc") == 3 ]]; then
  pass "--command 'exit 3': gcloud exits 3 ($(cat "$work/exit3.sec") s)"
else
  fail "--command 'exit 3': gcloud exited $(cat "$work/exit3.rc")"; show exit3
fi
# A worker whose pinned host key is wrong must be refused with --strict-host-key-checking=yes.
# Slow (gcloud retries any ssh failure, exit 255, 10 times 5 s apart), so only on request.
if [[ ${SSH_CHECK_SLOW:-} == 1 ]]; then
cp "$HOME/.ssh/google_compute_known_hosts" "$work/known_hosts.good"
other=$(ssh-keygen -q -t ed25519 -N "" -f "$work/other_key" && awk '{print $1" "$2}' "$work/other_key.pub")
sed -i -E "s|^(tpu\.$node_id-1-[^ ]*) .*|\1 $other|" "$HOME/.ssh/google_compute_known_hosts"
start=$(now)
rc=0
timeout 60 gcloud compute tpus tpu-vm ssh "$node" --zone "$zone" --worker=1 \
  --strict-host-key-checking=yes --command true --ssh-flag=-oConnectTimeout=5 \
  </dev/null >"$work/badkey.out" 2>"$work/badkey.err" || rc=$?
if [[ $rc != 0 ]] && grep -q "HOST IDENTIFICATION HAS CHANGED\|Host key verification failed" "$work/badkey.err"; then
  pass "a wrong pinned host key is refused (exit $rc after $(elapsed "$start" "$(now)") s)"
else
  fail "wrong host key: exit $rc"; cat "$work/badkey.err"
fi
cp "$work/known_hosts.good" "$HOME/.ssh/google_compute_known_hosts"
fi

# A server on the host's loopback; the tunnels below lead to it. It answers each connection's
# first line with "echo: LINE" and logs it.
setsid python3 - "$work/server.port" "$work/server.log" >/dev/null 2>&1 <<'PY' &
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(8)
open(sys.argv[1] + ".tmp", "w").write("%d\n" % s.getsockname()[1])
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
def serve(c):
    f = c.makefile("rwb")
    line = f.readline().decode().strip()
    open(sys.argv[2], "a").write(line + "\n")
    f.write(("echo: %s\n" % line).encode()); f.flush(); c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
bg_pids+=($!)
deadline=$((SECONDS + 10))
until [[ -s $work/server.port ]]; do
  [[ $SECONDS -ge $deadline ]] && { echo "FAIL local server did not start"; exit 1; }
  sleep 0.05
done
sport=$(cat "$work/server.port")
rport=17733

# --- 3. -- -N -R: a client inside worker 1's namespace reaches the host's server ---
start=$(now)
setsid gcloud compute tpus tpu-vm ssh "$node" --zone "$zone" --worker=1 \
  --strict-host-key-checking=yes -- -N -R "127.0.0.1:$rport:127.0.0.1:$sport" \
  </dev/null >"$work/tunnel.out" 2>"$work/tunnel.err" &
tunnel_pid=$!
bg_pids+=($tunnel_pid)
reply=""
deadline=$((SECONDS + 30))
while [[ $SECONDS -lt $deadline ]] && kill -0 "$tunnel_pid" 2>/dev/null; do
  reply=$(ip netns exec "taeg${id}w1" python3 - "$rport" 2>/dev/null <<'PY' || true
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
c.sendall(b"through the tunnel\n")
print(c.makefile().readline().strip())
PY
)
  [[ $reply == "echo: through the tunnel" ]] && break
  sleep 0.2
done
if [[ $reply == "echo: through the tunnel" ]]; then
  pass "ssh --worker=1 -- -N -R 127.0.0.1:$rport:127.0.0.1:$sport: tunnel up after $(elapsed "$start" "$(now)") s"
else
  fail "reverse tunnel (reply '$reply')"; cat "$work/tunnel.err"
fi
kill -- "-$tunnel_pid" 2>/dev/null || true
wait "$tunnel_pid" 2>/dev/null || true

# --- 4. a long-lived session per worker: token on stdin, -R tunnel, remote command dials back ---
agent='import socket,sys; t=sys.stdin.readline().strip(); c=socket.create_connection(("127.0.0.1",17733)); c.sendall(("hello "+t+"\n").encode()); print(c.makefile().readline().strip(), flush=True); sys.stdin.read()'
for i in 0 1; do
  mkfifo "$work/session$i.in"
  setsid gcloud compute tpus tpu-vm ssh "$node" --zone "$zone" --worker=$i \
    --strict-host-key-checking=yes --command "exec python3 -c '$agent'" \
    -- -R "127.0.0.1:$rport:127.0.0.1:$sport" -o ExitOnForwardFailure=yes -o ServerAliveInterval=15 \
    <"$work/session$i.in" >"$work/session$i.out" 2>"$work/session$i.err" &
  bg_pids+=($!)
  eval "exec {fd$i}>\"$work/session$i.in\""   # holds the session's stdin open
  fd=fd$i
  printf 'token-%s\n' "$i" >&"${!fd}"
done
deadline=$((SECONDS + 30))
until grep -q "echo: hello token-0" "$work/session0.out" 2>/dev/null &&
      grep -q "echo: hello token-1" "$work/session1.out" 2>/dev/null; do
  [[ $SECONDS -ge $deadline ]] && break
  sleep 0.2
done
if grep -q "hello token-0" "$work/server.log" && grep -q "hello token-1" "$work/server.log" &&
   grep -q "echo: hello token-1" "$work/session1.out"; then
  pass "per-worker sessions: token on stdin, remote command dialled back through -R on both workers"
else
  fail "per-worker sessions"; for i in 0 1; do echo "--- session $i:"; cat "$work/session$i.out" "$work/session$i.err"; done
fi
# Closing stdin ends the remote command, and with it the session.
exec {fd0}>&- {fd1}>&-
ended=0
deadline=$((SECONDS + 15))
while [[ $SECONDS -lt $deadline ]]; do
  ended=0
  for pid in "${bg_pids[@]: -2}"; do kill -0 "$pid" 2>/dev/null || ended=$((ended + 1)); done
  [[ $ended == 2 ]] && break
  sleep 0.1
done
if [[ $ended == 2 ]]; then pass "closing stdin ends both sessions"; else fail "sessions still running after stdin closed"; fi

echo "timings (s): create $(cat "$work/create.sec"), ssh --worker=all $(cat "$work/all.sec"), ssh --worker=0 cat $(cat "$work/cat.sec")"
echo "total $((SECONDS - t0)) s"
if [[ $failures -gt 0 ]]; then echo "$failures check(s) failed"; exit 1; fi
echo "all passed"
