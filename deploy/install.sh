#!/usr/bin/env bash
# install.sh [--prefix DIR] [--build-dir DIR] [--skip-deps]: installs TAE.
#
#   1. the Debian 12 packages TAE builds and runs with (deploy/install-deps.sh; sudo when not
#      root), unless --skip-deps
#   2. a Release build of the programs in the build dir (default ./build-release; an already
#      configured build dir is reused as it is)
#   3. copies taed, tae-agent, tae-job, tae-train and taectl to PREFIX/bin, and tae_log.py to
#      PREFIX/share/tae/python, where tae-agent looks for it (../share/tae/python from its own
#      directory) to put it on command jobs' PYTHONPATH
#
#   --prefix DIR      where to install (default ~/.local; PREFIX/bin should be on PATH)
#   --build-dir DIR   where to build (default ./build-release)
#   --skip-deps       do not run apt-get
#
# Then: taectl up, or the systemd user units in deploy/systemd (README.md there).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

prefix=$HOME/.local
build_dir=$root/build-release
deps=1
die() { echo "install.sh: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case $1 in
    -h | --help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
    --prefix) [[ $# -ge 2 && -n $2 ]] || die "--prefix needs a directory"; prefix=$2; shift ;;
    --build-dir) [[ $# -ge 2 && -n $2 ]] || die "--build-dir needs a directory"; build_dir=$2; shift ;;
    --skip-deps) deps=0 ;;
    *) die "unknown argument '$1' (see install.sh --help)" ;;
  esac
  shift
done
programs=(taed tae-agent tae-job tae-train taectl)

if [[ $deps == 1 ]]; then
  bash deploy/install-deps.sh || die "installing the Debian packages failed (deploy/install-deps.sh)"
fi
for tool in cmake ninja; do
  command -v "$tool" >/dev/null || die "$tool is not installed: run without --skip-deps, or apt-get install cmake ninja-build"
done

if [[ -f $build_dir/CMakeCache.txt ]]; then
  echo "install.sh: reusing the configured build in $build_dir"
else
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    || die "configuring the build in $build_dir failed (missing packages? run without --skip-deps)"
fi
cmake --build "$build_dir" -j "$(nproc)" --target "${programs[@]}" \
  || die "building ${programs[*]} in $build_dir failed"

mkdir -p "$prefix/bin" "$prefix/share/tae/python" || die "cannot create $prefix/bin"
for program in "${programs[@]}"; do
  [[ -x $build_dir/bin/$program ]] || die "$build_dir/bin/$program was not built"
  install -m 0755 "$build_dir/bin/$program" "$prefix/bin/$program"
done
install -m 0644 agent/python/tae_log.py "$prefix/share/tae/python/tae_log.py"
mkdir -p "$prefix/share/tae/python/tae_wandb/wandb"
install -m 0644 agent/python/tae_wandb/wandb/__init__.py \
  "$prefix/share/tae/python/tae_wandb/wandb/__init__.py"
mkdir -p "$prefix/share/tae/python/tae_torch"
install -m 0644 agent/python/tae_torch/*.py "$prefix/share/tae/python/tae_torch/"
# The run-key schema the torch engine reads, written by the build of tae-train (tae-train --schema).
schema=$build_dir/share/tae/python/tae_torch/schema.json
[[ -f $schema ]] || die "$schema was not written (building tae-train writes it)"
install -m 0644 "$schema" "$prefix/share/tae/python/tae_torch/schema.json"

echo "install.sh: installed ${programs[*]} in $prefix/bin and tae_log.py, tae_torch, tae_wandb in $prefix/share/tae/python"
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "install.sh: $prefix/bin is not on PATH; add it: export PATH=\"$prefix/bin:\$PATH\"" ;;
esac
