#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine: OVN/OVS daemons and tools, and npm packages.
# Idempotent: each step is skipped when its result is already present.
set -euo pipefail
cd "$(dirname "$0")/.."

debs=(ovn-central ovn-host openvswitch-switch openvswitch-common iproute2 ethtool conntrack iputils-ping
      netcat-openbsd tcpdump openssl nftables util-linux procps
      containerd runc containernetworking-plugins) # the real-node sandbox (zovn sandbox up --kubelet)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Not `npm ci`: the registry mirror serves no tarballs for biome's binaries of other platforms, so the lock file
# cannot list them and `npm ci` refuses it. `npm install --no-save` installs exactly the locked versions.
if [[ ! -d node_modules ]] || [[ package-lock.json -nt node_modules/.package-lock.json ]]; then
  echo "install-deps: npm install (from package-lock.json)"
  npm install --no-save --no-fund --no-audit --loglevel=error
fi
