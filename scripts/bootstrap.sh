#!/usr/bin/env bash
# Bring a Debian 12 machine to the state the project needs: apt packages, the
# kernel-header link bcc wants, a virtual environment (.venv) made from the system
# Python with --system-site-packages (bcc and Mininet are Debian packages), and the
# native engine (traffic/native/libtnengine.so, built with gcc and libisal-dev) and the
# native WAN delay line (mininet_topos/wan/native/bin/delayline).
# Idempotent: each step checks first, so a second run takes a few seconds.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
venv="$here/.venv"
stamp="$venv/.bootstrap-stamp"

APT_PACKAGES=(
  python3-venv python3-dev python3-bpfcc bpfcc-tools linux-headers-amd64
  mininet iproute2 iputils-ping ethtool tcpdump cpp gcc
  influxdb victoria-metrics openssl procps make libisal-dev chromium
)

need_apt=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$p")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "bootstrap: need root to install: ${need_apt[*]}" >&2
    exit 1
  fi
  echo "bootstrap: installing ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # The Debian packages start their services; the tests start their own instances.
  for svc in influxdb victoria-metrics; do
    systemctl stop "$svc" >/dev/null 2>&1 || true
  done
fi

# bcc compiles against /lib/modules/$(uname -r)/build. Kernels without a matching
# header package (custom or cloud kernels) get a link to the newest installed headers;
# the UAPI networking headers tc/XDP programs need are the same.
kmod="/lib/modules/$(uname -r)"
if [ ! -e "$kmod/build" ] && [ "$(id -u)" = 0 ]; then
  hdr=$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$hdr" ]; then
    mkdir -p "$kmod"
    ln -sfn "$hdr" "$kmod/build"
    echo "bootstrap: linked $kmod/build -> $hdr"
  fi
fi
# bcc also reads the architecture-independent half (include/linux/kconfig.h ...).
if [ ! -e "$kmod/source" ] && [ "$(id -u)" = 0 ]; then
  common=$(ls -d /usr/src/linux-headers-*-common 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$common" ]; then
    ln -sfn "$common" "$kmod/source"
    echo "bootstrap: linked $kmod/source -> $common"
  fi
fi

if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
if [ ! -f "$stamp" ] || [ "$here/pyproject.toml" -nt "$stamp" ]; then
  "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$venv/bin/python" -m pip install -q -e "$here[dev]"
  touch "$stamp"
fi

# The native engine (libtnengine.so; make rebuilds only what is older than its sources).
make -s -C "$here/traffic/native"
# The native WAN delay line (mininet_topos/wan/native/bin/delayline).
make -s -C "$here/mininet_topos/wan/native"
