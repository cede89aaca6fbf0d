#!/usr/bin/env bash
# Installs the Debian 12 packages TAE builds and runs with. Uses sudo when not root.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev libre2-dev
  libtorch-dev libopenblas0-pthread
  libsqlite3-dev libspdlog-dev libfmt-dev libboost-dev libssl-dev
  libtomlplusplus-dev nlohmann-json3-dev catch2
  bible-kjv python3 python3-torch openssl iproute2 rsync libgloo-dev
  openssh-client openssh-server
  chromium chromium-driver python3-selenium
  python3-optuna python3-protobuf python3-scipy python3-statsmodels
  python3-pandas python3-matplotlib python3-nbconvert python3-nbclient python3-ipykernel
)
# The dashboard's front-end dependency (uPlot) comes from the npm registry, pinned by
# web/package-lock.json; Debian 12's nodejs 18 and npm 9 install it. A machine that already has
# node and npm (e.g. from NodeSource) keeps them.
if ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(nodejs npm)
fi
# kubectl for the gke provider (and its tests): Debian's kubernetes-client only where no kubectl
# is on PATH. The Google Cloud CLI's kubectl package owns /usr/bin/kubectl, and installing
# Debian's over it fails.
if ! command -v kubectl >/dev/null 2>&1; then
  PACKAGES+=(kubernetes-client)
fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
install_web() {
  # npm ci installs exactly the lockfile's versions; skipped when those are installed already.
  local web
  web="$(cd "$(dirname "$0")/.." && pwd)/web"
  if python3 - "$web" <<'PY'
import json, os, sys
web = sys.argv[1]
lock = json.load(open(os.path.join(web, "package-lock.json")))["packages"]
for path, meta in lock.items():
    if not path:
        continue
    try:
        installed = json.load(open(os.path.join(web, path, "package.json")))["version"]
    except OSError:
        sys.exit(1)
    if installed != meta["version"]:
        sys.exit(1)
PY
  then
    echo "install-deps: web/node_modules matches web/package-lock.json"
    return 0
  fi
  echo "install-deps: npm ci in web/ (uPlot, pinned by web/package-lock.json)"
  (cd "$web" && npm ci --no-audit --no-fund --loglevel=error)
}
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  install_web
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
if [ "$status" -ne 0 ]; then exit "$status"; fi
install_web
