#!/usr/bin/env bash
# Builds protobuf-lite for WebAssembly from Debian's own source package, the same version as the
# protoc that generates the ONNX classes (protobuf-compiler), and installs it into a cache folder
# that survives `rm -rf build`. Idempotent: does nothing when the stamped install is there.
#
#   scripts/build_protobuf_wasm.sh            # prints the install prefix on its last line
#   scripts/build_protobuf_wasm.sh --pthread  # the variant for the threaded module (fx-threads):
#                                             # every object of a --shared-memory link needs
#                                             # atomics + bulk memory, so it is built with -pthread
#                                             # into its own prefix (...-wasmeh-pthread)
#
# Env: FXWASM_DEPS_DIR (default ~/.cache/fxwasm) — where sources and the install go.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '[protobuf-wasm] %s\n' "$*" >&2; }

variant=""
cxxflags="-fwasm-exceptions"
case "${1:-}" in
  "") ;;
  --pthread) variant="-pthread"; cxxflags="$cxxflags -pthread" ;;
  *) echo "usage: $0 [--pthread]" >&2; exit 2 ;;
esac

deps="${FXWASM_DEPS_DIR:-$HOME/.cache/fxwasm}"
# Debian's protoc and runtime headers must match the wasm runtime exactly (generated code checks
# GOOGLE_PROTOBUF_VERSION): take the version from the installed Debian package.
debver="$(dpkg-query -W -f='${Version}' libprotobuf-dev)"  # e.g. 3.21.12-3
upver="${debver%%-*}"
upver="${upver#*:}"
# -wasmeh: built with native wasm exceptions, as fxwasm is (CMakeLists.txt); the objects of the
# two exception models do not link together.
prefix="$deps/protobuf-lite-wasm-$upver-wasmeh$variant"
stamp="$prefix/.fxwasm-stamp"

if [ -f "$stamp" ] && [ -f "$prefix/lib/libprotobuf-lite.a" ]; then
  log "cached: $prefix"
  echo "$prefix"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

# `apt-get source` needs a deb-src entry for bookworm and dpkg-dev (dpkg-source).
if ! command -v dpkg-source >/dev/null 2>&1; then
  log "installing dpkg-dev (for apt-get source)"
  $SUDO apt-get install -y -q --no-install-recommends dpkg-dev </dev/null >&2
fi
if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  log "adding a deb-src entry for bookworm (/etc/apt/sources.list.d/fxwasm-deb-src.sources)"
  printf '%s\n' 'Types: deb-src' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm' \
    'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' |
    $SUDO tee /etc/apt/sources.list.d/fxwasm-deb-src.sources >/dev/null
  $SUDO apt-get update -q </dev/null >&2
fi

src="$deps/src"
mkdir -p "$src"
srcdir="$src/protobuf-$upver"
if [ ! -f "$srcdir/CMakeLists.txt" ]; then
  log "fetching Debian source package protobuf=$debver"
  (cd "$src" && apt-get source -q "protobuf=$debver" </dev/null >&2)
fi

export NODE_PATH="/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}"
bdir="$deps/build/protobuf-wasm-$upver-wasmeh$variant"
log "building libprotobuf-lite with Emscripten into $prefix"
# -fwasm-exceptions: the objects link into modules that catch C++ exceptions (fx::Error);
# -pthread (the variant): they link into a shared-memory module.
emcmake cmake -S "$srcdir" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$prefix" -Dprotobuf_BUILD_TESTS=OFF \
  -Dprotobuf_BUILD_PROTOC_BINARIES=OFF -Dprotobuf_BUILD_SHARED_LIBS=OFF \
  -Dprotobuf_WITH_ZLIB=OFF -DCMAKE_CXX_FLAGS="$cxxflags" >&2
cmake --build "$bdir" --target libprotobuf-lite --parallel "$(nproc)" >&2
# Install only what a lite consumer needs: the static library and the headers.
mkdir -p "$prefix/lib" "$prefix/include"
cp "$bdir/libprotobuf-lite.a" "$prefix/lib/"
(cd "$srcdir/src" && find google \( -name '*.h' -o -name '*.inc' \) -exec cp --parents {} "$prefix/include" \;)
printf '%s\n' "$debver" > "$stamp"
log "done: $prefix"
echo "$prefix"
