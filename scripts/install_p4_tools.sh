#!/usr/bin/env bash
# Install prebuilt BMv2 and p4c (optional checking tools, never required by the project)
# from a folder of tarballs, outside the checkout, so the `bmv2` test tier can run.
#
#   scripts/install_p4_tools.sh SRC_DIR DEST_DIR
#   eval "$(scripts/install_p4_tools.sh SRC_DIR DEST_DIR)"   # sets PATH and friends
#
# SRC_DIR holds bmv2/bmv2-*.tgz (simple_switch_grpc, simple_switch, simple_switch_CLI, their libraries
# and Python modules) and p4c/p4c-bm2-ss-*.tgz (p4c's BMv2 compiler with p4include/),
# or the same tarballs directly.  The script installs the Debian runtime libraries they
# link against, unpacks each tarball once into DEST_DIR/<tarball name>/ (a second run
# finds the stamp and takes well under a second) and prints the `export` line for
# PATH, LD_LIBRARY_PATH and PYTHONPATH on stdout; messages go to stderr.
# Exit status 3: no tarballs in SRC_DIR (nothing installed, nothing printed).
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 SRC_DIR DEST_DIR" >&2
  exit 2
fi
src=$1
dest=$2

find_tgz() {  # first match of $1 under SRC_DIR or SRC_DIR/$2
  local f
  for f in "$src/$2"/$1 "$src"/$1; do
    [ -f "$f" ] && { echo "$f"; return 0; }
  done
  return 1
}
bmv2_tgz=$(find_tgz 'bmv2-*.tgz' bmv2 || true)
p4c_tgz=$(find_tgz 'p4c-bm2-ss-*.tgz' p4c || true)
if [ -z "$bmv2_tgz" ] && [ -z "$p4c_tgz" ]; then
  echo "install_p4_tools: no bmv2-*.tgz or p4c-bm2-ss-*.tgz in $src" >&2
  exit 3
fi

# The shared libraries the prebuilt binaries need (Debian 12 names).
APT_PACKAGES=()
[ -n "$bmv2_tgz" ] && APT_PACKAGES+=(libgrpc++1.51 libjsoncpp25 libboost-program-options1.74.0
  libxxhash0 libpcap0.8 libgmp10 libnanomsg5 libprotobuf32 libthrift-0.17.0 python3-thrift)
[ -n "$p4c_tgz" ] && APT_PACKAGES+=(libgc1 libboost-iostreams1.74.0 libprotobuf32)
need=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install_p4_tools: need root to install: ${need[*]}" >&2
    exit 1
  fi
  echo "install_p4_tools: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

unpack() {  # tarball -> the folder it was unpacked to (once per tarball content name)
  local tgz=$1 name dir
  name=$(basename "$tgz" .tgz)
  dir="$dest/$name"
  if [ ! -f "$dir/.unpacked" ]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    tar xzf "$tgz" -C "$dir"
    touch "$dir/.unpacked"
    echo "install_p4_tools: unpacked $(basename "$tgz") into $dir" >&2
  fi
  echo "$dir"
}

path_add="" lib_add="" py_add=""
if [ -n "$bmv2_tgz" ]; then
  d=$(unpack "$bmv2_tgz")
  path_add="$d/bmv2-ref/bin"
  lib_add="$d/bmv2-ref/lib"
  py_add="$d/bmv2-ref/python"
fi
if [ -n "$p4c_tgz" ]; then
  d=$(unpack "$p4c_tgz")
  path_add="${path_add:+$path_add:}$d/p4c-ref"
fi
echo "export PATH=\"$path_add:\$PATH\"" \
     "LD_LIBRARY_PATH=\"$lib_add\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\"" \
     "PYTHONPATH=\"$py_add\${PYTHONPATH:+:\$PYTHONPATH}\""
