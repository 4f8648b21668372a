#!/usr/bin/env bash
# Compare flexkern with llama.cpp on the default model: greedy continuations, last-position
# logits, tokenization and speed, same threads, one run. Never in CI.
#
# llama.cpp comes from the llama-cpp-python source package on PyPI (its vendored llama.cpp),
# built once per machine into .cache/llamacpp (static libraries plus bench/llamacpp_probe.c,
# a small driver against llama.h); cmake and ninja come from PyPI into .cache/venv-llamacpp.
# The build takes tens of minutes on 2 busy cores; later runs reuse it.
#
#   bench/llamacpp_compare.sh [--build-only] [--threads N] [--model FILE.gguf] [--repeats R]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=$root/.cache/venv-llamacpp
dir=$root/.cache/llamacpp
probe=$dir/llamacpp_probe
log=$root/.cache/llamacpp-build.log
mkdir -p "$dir"

build_only=0
args=()
for a in "$@"; do
  if [[ $a == --build-only ]]; then build_only=1; else args+=("$a"); fi
done

if [[ ! -x $probe ]]; then
  echo "building llama.cpp from the llama-cpp-python sdist (log: $log)" >&2
  [[ -x $venv/bin/python ]] || python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet cmake ninja numpy >>"$log" 2>&1
  if ! ls "$dir"/sdist/llama_cpp_python-*.tar.gz >/dev/null 2>&1; then
    "$venv/bin/pip" download --no-deps --no-binary llama-cpp-python --dest "$dir/sdist" \
      llama-cpp-python==0.3.36 >>"$log" 2>&1
  fi
  src=$(ls -d "$dir"/src/llama_cpp_python-*/vendor/llama.cpp 2>/dev/null | head -n1 || true)
  if [[ -z $src ]]; then
    mkdir -p "$dir/src"
    tar xzf "$(ls -t "$dir"/sdist/llama_cpp_python-*.tar.gz | head -n1)" -C "$dir/src"
    src=$(ls -d "$dir"/src/llama_cpp_python-*/vendor/llama.cpp | head -n1)
  fi
  # A plain CPU build for this machine: the llama and ggml libraries only.
  PATH=$venv/bin:$PATH cmake -S "$src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON -DGGML_OPENMP=ON -DLLAMA_BUILD_COMMON=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF >>"$log" 2>&1
  PATH=$venv/bin:$PATH nice -n 19 cmake --build "$dir/build" -j 2 >>"$log" 2>&1
  b=$dir/build
  g++ -O2 -x c bench/llamacpp_probe.c -x none -I"$src/include" -I"$src/ggml/include" \
    "$b/src/libllama.a" "$b/ggml/src/libggml.a" "$b/ggml/src/libggml-cpu.a" \
    "$b/ggml/src/libggml-base.a" -fopenmp -lm -lpthread -o "$probe" >>"$log" 2>&1
  echo "llama.cpp built: $probe" >&2
fi
[[ $build_only == 1 ]] && exit 0

# The flexkern side runs from a release build of the CLI.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
cargo build --release -p flexkern-cli >&2
exec "$venv/bin/python" "$root/bench/llamacpp_compare.py" --probe "$probe" \
  --flexkern "$CARGO_TARGET_DIR/release/flexkern" "${args[@]}"
