#!/usr/bin/env bash
# Build (once) and print the path of a llama-cpp-python wheel for this CPU.
#
# llama-cpp-python ships only a source distribution; pip compiles it (about 8 minutes on 2
# cores). Its default build uses -march=native, which on CPUs that advertise AMX also compiles
# llama.cpp's AMX kernels; on virtual machines whose host does not grant AMX tiles that
# crashes with "Illegal instruction" at the first batched decode (seen on this project's
# machines). So we build with GGML_NATIVE=OFF and switch on each SIMD extension this CPU
# reports in /proc/cpuinfo (AVX2/FMA/F16C, AVX-512 and VNNI), never AMX. The wheel is kept in
# podium's cache under a name made of those flags, so later setups reuse it.
set -euo pipefail
PY=${PYTHON:-python3}
VERSION=0.3.36
flags="-DGGML_NATIVE=OFF"
tag=generic
if [ "$(uname -m)" = "x86_64" ] && [ -r /proc/cpuinfo ]; then
  cpu=$(grep -m1 '^flags' /proc/cpuinfo)
  has() { [[ " $cpu " == *" $1 "* ]]; }
  if has avx2 && has fma && has f16c; then
    flags="$flags -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
    tag=avx2
    has bmi2 && flags="$flags -DGGML_BMI2=ON"
    has avx_vnni && { flags="$flags -DGGML_AVX_VNNI=ON"; tag="$tag-vnni"; }
    if has avx512f && has avx512bw && has avx512dq && has avx512vl; then
      flags="$flags -DGGML_AVX512=ON"
      tag="$tag-avx512"
      has avx512vbmi && { flags="$flags -DGGML_AVX512_VBMI=ON"; tag="$tag-vbmi"; }
      has avx512_vnni && { flags="$flags -DGGML_AVX512_VNNI=ON"; tag="$tag-vnni"; }
      has avx512_bf16 && { flags="$flags -DGGML_AVX512_BF16=ON"; tag="$tag-bf16"; }
    fi
  fi
fi
CACHE=${PODIUM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/podium}/wheels/llama-cpp-python-$VERSION-$tag
mkdir -p "$CACHE"
wheel=$(ls "$CACHE"/llama_cpp_python-$VERSION-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  export CMAKE_ARGS="$flags ${CMAKE_ARGS:-}"
  echo "building llama-cpp-python $VERSION ($CMAKE_ARGS); this takes about 8 minutes on 2 cores" >&2
  "$PY" -m pip wheel --no-deps --no-cache-dir "llama-cpp-python==$VERSION" -w "$CACHE" >&2
  wheel=$(ls "$CACHE"/llama_cpp_python-$VERSION-*.whl | head -1)
fi
echo "$wheel"
