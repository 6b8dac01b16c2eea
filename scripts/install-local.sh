#!/usr/bin/env bash
# Install the local-model extra into a venv: llama-cpp-python (and its OpenAI-compatible server,
# which the tests run) built from source for any x86-64-v3 CPU, then scrollctx[local].
#
# Why not plain `pip install -e '.[local]'`: llama.cpp then builds with -march=native, and on
# CPUs that report AMX its AMX code crashes (`ldtilecfg` in libggml-cpu.so, signal 11). And pip
# caches a built wheel by the sdist alone, ignoring CMAKE_ARGS, so a native wheel built once
# would be reused by every later install: this build gets a pip cache of its own, named by a
# hash of its flags, that no other install writes to.
#
# Usage: scripts/install-local.sh [VENV]   (default .venv; about 4-8 minutes on two cores)
set -euo pipefail
venv=${1:-.venv}
flags="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF"
key=$(printf '%s' "$flags" | sha256sum | cut -c1-12)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/scrollctx/pip-llama-portable-$key"
CMAKE_ARGS="$flags" PIP_CACHE_DIR="$cache" "$venv/bin/python" -m pip install --quiet \
  'llama-cpp-python[server]>=0.3'
"$venv/bin/python" -m pip install --quiet -e '.[local]'
