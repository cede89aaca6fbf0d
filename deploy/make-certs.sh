#!/usr/bin/env bash
# make-certs.sh OUT_DIR [SERVER_NAME_OR_IP...]
#
# Makes the certificates for TLS on the agent link (docs/security.md), with the openssl CLI:
#
#   ca.pem     ca.key      a private CA. ca.pem goes to every agent (--tls-ca) and, for mTLS,
#                          to taed (--tls-client-ca). ca.key signs; keep it off the workers.
#   server.pem server.key  taed's certificate (--tls-cert, --tls-key), valid for every
#                          SERVER_NAME_OR_IP given (subjectAltName DNS:/IP: entries).
#   agent.pem  agent.key   a client certificate for agents (--tls-cert, --tls-key on tae-agent),
#                          needed only when taed runs with --tls-client-ca.
#
# Without names the server certificate is for localhost, 127.0.0.1 and this host's name. Agents
# check taed's certificate against the host in their --taed address; when that host is not in the
# certificate (say, an IP you did not list), give them --tls-server-name with a name that is.
#
# An existing ca.pem/ca.key in OUT_DIR is reused, so running the script again with other names
# issues a new server certificate that the agents already trust. Keys are EC P-256, written 0600
# and unencrypted (taed and tae-agent read them at start without a passphrase).
set -euo pipefail

if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
  exit $(($# < 1 ? 2 : 0))
fi
if ! command -v openssl >/dev/null; then
  echo "make-certs.sh: needs the openssl command (Debian: apt-get install openssl)" >&2
  exit 1
fi

out=$1
shift
names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  names=(localhost 127.0.0.1 "$(hostname)")
fi

umask 077  # every file below, keys included, is created 0600
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# subjectAltName: IP: for IPv4/IPv6 literals, DNS: for everything else.
san=""
for name in "${names[@]}"; do
  if [[ $name =~ ^[0-9]+(\.[0-9]+){3}$ || $name == *:* ]]; then
    san+="${san:+,}IP:$name"
  else
    san+="${san:+,}DNS:$name"
  fi
done

new_key() {  # new_key FILE: an EC P-256 private key (PKCS#8 PEM), mode 0600
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"
  chmod 0600 "$1"
}

serial() { echo "0x$(openssl rand -hex 16)"; }

# 1. The CA: self-signed, allowed to sign certificates and nothing else, 10 years.
if [[ -f $out/ca.pem && -f $out/ca.key ]]; then
  echo "make-certs.sh: reusing the CA in $out/ca.pem"
else
  new_key "$out/ca.key"
  cat >"$work/ca.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = TAE agent link CA
[v3_ca]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EOF
  openssl req -x509 -new -config "$work/ca.cnf" -extensions v3_ca -key "$out/ca.key" \
    -days 3650 -sha256 -set_serial "$(serial)" -out "$out/ca.pem"
fi

# sign NAME CN EXTENSIONS: NAME.key (new) and NAME.pem signed by the CA, 825 days.
sign() {
  local name=$1 cn=$2 extensions=$3
  new_key "$out/$name.key"
  openssl req -new -key "$out/$name.key" -subj "/CN=$cn" -out "$work/$name.csr"
  printf '%s\n' "$extensions" >"$work/$name.ext"
  if ! openssl x509 -req -in "$work/$name.csr" -CA "$out/ca.pem" -CAkey "$out/ca.key" \
    -set_serial "$(serial)" -days 825 -sha256 -extfile "$work/$name.ext" \
    -out "$out/$name.pem" 2>"$work/$name.err"; then
    cat "$work/$name.err" >&2
    exit 1
  fi
}

# 2. taed's server certificate: serverAuth, for the given names.
sign server "${names[0]}" "basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = $san
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid"

# 3. The agents' client certificate: clientAuth only; taed checks that the CA signed it.
sign agent tae-agent "basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid"

chmod 0644 "$out/ca.pem" "$out/server.pem" "$out/agent.pem"
openssl verify -CAfile "$out/ca.pem" "$out/server.pem" "$out/agent.pem" >/dev/null

cat <<EOF
made in $out: ca.pem ca.key server.pem server.key agent.pem agent.key
server certificate for: $san
taed:      taed --agent-listen 0.0.0.0:7733 --tls-cert $out/server.pem --tls-key $out/server.key \\
             [--tls-client-ca $out/ca.pem]
tae-agent: tae-agent --taed HOST:7733 --tls-ca $out/ca.pem \\
             [--tls-cert $out/agent.pem --tls-key $out/agent.key] [--tls-server-name ${names[0]}]
EOF
