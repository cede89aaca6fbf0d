#!/usr/bin/env bash
# Puts the `tae` Python library (client/python/tae) and this build's _tae_build module on Debian's
# python3 path, for the user who runs it: a tae.pth in that python3's user site-packages. No
# copy, nothing from PyPI: `git pull` and a build update it. Usage: deploy/install-python.sh
# [BUILD_DIR] (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
build="$(cd "${1:-build}" && pwd)"
python=/usr/bin/python3
site="$("$python" -m site --user-site)"
mkdir -p "$site"
printf '%s\n%s\n' "$repo/client/python" "$build/python" > "$site/tae.pth"
if ! "$python" -c "import tae" 2>/tmp/tae-import.$$; then
  echo "install-python: $python cannot import tae: $(tail -1 /tmp/tae-import.$$)" >&2
  rm -f /tmp/tae-import.$$
  exit 1
fi
rm -f /tmp/tae-import.$$
echo "install-python: $python imports tae from $repo/client/python ($site/tae.pth)"
