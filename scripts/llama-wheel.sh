#!/usr/bin/env bash
# Build (once) and print the path of a portable llama-cpp-python wheel.
#
# llama-cpp-python ships only a source distribution; pip compiles it (about 8 minutes on 2
# cores). The default build uses -march=native, which on some virtual machines enables AMX
# tiles that the host does not grant and crashes with "Illegal instruction" on the first
# batched decode. We build with GGML_NATIVE=OFF and AVX2/FMA/F16C, which every x86-64 CPU of
# the last decade runs, and keep the wheel in podium's cache so later setups reuse it.
set -euo pipefail
PY=${PYTHON:-python3}
VERSION=0.3.36
CACHE=${PODIUM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/podium}/wheels/llama-cpp-python-$VERSION-avx2
mkdir -p "$CACHE"
wheel=$(ls "$CACHE"/llama_cpp_python-$VERSION-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  arch=$(uname -m)
  if [ "$arch" = "x86_64" ]; then
    export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON ${CMAKE_ARGS:-}"
  else
    export CMAKE_ARGS="-DGGML_NATIVE=OFF ${CMAKE_ARGS:-}"
  fi
  echo "building llama-cpp-python $VERSION ($CMAKE_ARGS); this takes about 8 minutes on 2 cores" >&2
  "$PY" -m pip wheel --no-deps --no-cache-dir "llama-cpp-python==$VERSION" -w "$CACHE" >&2
  wheel=$(ls "$CACHE"/llama_cpp_python-$VERSION-*.whl | head -1)
fi
echo "$wheel"
