#!/usr/bin/env bash
# Compare flexkern with llama.cpp on the default model: greedy continuations, last-position
# logits, tokenization and speed. llama.cpp is built once per machine from the llama-cpp-python
# source package into .cache/venv-llamacpp (tens of minutes on 2 cores); never run this in CI.
#
#   bench/llamacpp_compare.sh [--build-only] [--threads N] [--model FILE.gguf]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=$root/.cache/venv-llamacpp
log=$root/.cache/llamacpp-build.log
mkdir -p "$root/.cache"

build_only=0
args=()
for a in "$@"; do
  if [[ $a == --build-only ]]; then build_only=1; else args+=("$a"); fi
done

# Build llama.cpp (through llama-cpp-python's sdist) unless the venv already imports it.
if ! "$venv/bin/python" -c 'import llama_cpp' 2>/dev/null; then
  echo "building llama.cpp from the llama-cpp-python sdist (log: $log)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet numpy >>"$log" 2>&1
  # Plain CPU build tuned for this machine; examples/tests skipped to save time.
  CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF" \
  CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
    nice -n 19 "$venv/bin/pip" install --verbose --no-binary llama-cpp-python \
      --no-cache-dir llama-cpp-python >>"$log" 2>&1
  echo "llama.cpp built" >&2
fi
[[ $build_only == 1 ]] && exit 0

# The flexkern side runs from a release build of the CLI.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
cargo build --release -p flexkern-cli >&2
exec "$venv/bin/python" "$root/bench/llamacpp_compare.py" \
  --flexkern "$CARGO_TARGET_DIR/release/flexkern" "${args[@]}"
