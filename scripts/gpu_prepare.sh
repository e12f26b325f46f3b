#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run HERE (a machine that reaches Debian's package registry), before a GPU session: puts the
# build dependencies the GPU machine lacks (pugixml, nlohmann-json, hwloc and hwloc's own runtime
# needs) into .gpu-deps/ in the checkout, unpacked, so scripts/gpu_check.sh can build there
# offline. Name `.gpu-deps` in the device tool's `carry`. Usage: bash scripts/gpu_prepare.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/.gpu-deps"
# The packages a build on that machine was seen to need (issue 16); runtime libraries included,
# since the module links libhwloc.so.15 dynamically.
PACKAGES=(libpugixml-dev libpugixml1v5 nlohmann-json3-dev libhwloc-dev libhwloc15
          libhwloc-plugins libpciaccess0 libltdl7 libnuma1)
LIMIT_MIB=64

mkdir -p "$DEPS"
git -C "$ROOT" check-ignore -q "$DEPS" || {
  echo "gpu_prepare: .gpu-deps/ is not ignored by git; add it to .gitignore" >&2; exit 2; }
rm -rf "$DEPS"
mkdir -p "$DEPS/debs" "$DEPS/root"
(cd "$DEPS/debs" && apt-get -o APT::Sandbox::User=root download -qq "${PACKAGES[@]}")
for deb in "$DEPS"/debs/*.deb; do dpkg -x "$deb" "$DEPS/root"; done
# Only the unpacked tree travels; documentation is dead weight against the carry limit.
rm -rf "$DEPS/debs" "$DEPS/root/usr/share/doc" "$DEPS/root/usr/share/man"
size_mib=$(( $(du -sk "$DEPS" | cut -f1) / 1024 ))
if [ "$size_mib" -ge "$LIMIT_MIB" ]; then
  echo "gpu_prepare: .gpu-deps is ${size_mib} MiB, over the ${LIMIT_MIB} MiB carry limit" >&2
  exit 1
fi
echo "gpu_prepare: ${PACKAGES[*]} unpacked into .gpu-deps/root (${size_mib} MiB)"
