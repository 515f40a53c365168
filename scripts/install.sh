#!/usr/bin/env bash
# Installs everything Fuzzball needs on a Debian 12 machine: system packages, then this
# project (editable) with its test tools. Idempotent and quiet; run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages: the C toolchain for the runtime, and the real components the node runtime,
# the image backends and the tests drive (see DESIGN.md "Machines this must run on").
APT_PACKAGES=(
  gcc libc6-dev make
  erofs-utils busybox-static squashfs-tools
  bubblewrap runc
  docker-registry apache2-utils skopeo umoci
  iproute2 procps nftables
  strace
  postgresql
  mpich libmpich-dev
  openmpi-bin libopenmpi-dev
  prometheus prometheus-alertmanager prometheus-node-exporter
  chromium chromium-driver
  nginx-light haproxy wrk curl
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# docker-registry's package starts a system instance on :5000, the prometheus packages
# theirs on 9090, 9093 and 9100, nginx one on :80 (HAProxy and nginx are bench/proxy.py's
# peers); the tests, the benches and `fuzzball local up` start their own.
if command -v systemctl >/dev/null 2>&1; then
  systemctl disable --now docker-registry >/dev/null 2>&1 || true
  for unit in prometheus prometheus-alertmanager prometheus-node-exporter nginx haproxy; do
    systemctl disable --now "$unit" >/dev/null 2>&1 || true
  done
fi

PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
"$PY" -m pip install --quiet --upgrade "setuptools>=68" wheel
"$PY" -m pip install --quiet -e '.[test]'
echo "fuzzball installed: $("$PY" -m fuzzball_core.cli version -o json | tr -d '\n ')"
