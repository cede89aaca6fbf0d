#!/usr/bin/env bash
# Installs the Debian 12 packages TAE builds and runs with. Uses sudo when not root.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libtorch-dev libopenblas0-pthread
  libsqlite3-dev libspdlog-dev libfmt-dev libboost-dev libssl-dev
  libtomlplusplus-dev nlohmann-json3-dev catch2
  bible-kjv python3 python3-torch openssl iproute2 rsync libgloo-dev
  openssh-client openssh-server
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
# openssh-server is here for the ssh provider's tests, which run their own sshd inside network
# namespaces: keep the package's install script from starting a system sshd (policy-rc.d 101 =
# "do not start services"), unless this machine already has a policy.
policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  policy=/usr/sbin/policy-rc.d
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod +x "$policy"
fi
status=0
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" || status=$?
if [ -n "$policy" ]; then $SUDO rm -f "$policy"; fi
exit "$status"
