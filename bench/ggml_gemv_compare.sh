#!/usr/bin/env bash
# flexkern's GEMV beside llama.cpp's (ggml's CPU backend, mul_mat with one column) on the same
# formats, shapes, threads and 512 MiB weight working set, in one run. Never in CI.
#
# ggml comes from the llama-cpp-python 0.3.36 source package on PyPI (its vendored llama.cpp),
# built once into .cache/ggml-gemv (ggml only, static, -march=native), with cmake and ninja
# from PyPI in .cache/venv-llamacpp; bench/ggml_gemv.c drives it.
#
# The two engines alternate format by format, for --rounds rounds, so both see the machine in
# the same state (on a shared VM the bandwidth moves by tens of percent within minutes).
#
#   bench/ggml_gemv_compare.sh [--formats q4_0,q8_0] [--n 4096,14336] [--k 4096] [--threads T] [--reps R] [--rounds N]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=$root/.cache/venv-llamacpp
dir=$root/.cache/ggml-gemv
exe=$dir/ggml_gemv
formats=q4_0,q4_1,q8_0,q4_k,q6_k,f16
ns=4096,14336
k=4096
threads=$(nproc)
reps=30
rounds=2
while [[ $# -gt 0 ]]; do
  case $1 in
    --formats) formats=$2; shift 2 ;;
    --n) ns=$2; shift 2 ;;
    --k) k=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done

if [[ ! -x $exe || bench/ggml_gemv.c -nt $exe ]]; then
  mkdir -p "$dir"
  log=$dir/build.log
  echo "building ggml from the llama-cpp-python sdist (log: $log)" >&2
  [[ -x $venv/bin/python ]] || python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet cmake ninja >>"$log" 2>&1
  if ! ls "$dir"/sdist/llama_cpp_python-0.3.36.tar.gz >/dev/null 2>&1; then
    "$venv/bin/pip" download --no-deps --no-binary llama-cpp-python --dest "$dir/sdist" \
      llama-cpp-python==0.3.36 >>"$log" 2>&1
  fi
  src=$dir/src/llama_cpp_python-0.3.36/vendor/llama.cpp
  if [[ ! -d $src ]]; then
    mkdir -p "$dir/src"
    tar xzf "$dir/sdist/llama_cpp_python-0.3.36.tar.gz" -C "$dir/src"
  fi
  # Configured from llama.cpp's top level (ggml alone wants files the sdist leaves out), built
  # for the ggml targets only.
  PATH=$venv/bin:$PATH cmake -S "$src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON -DGGML_OPENMP=ON -DLLAMA_BUILD_COMMON=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF >>"$log" 2>&1
  PATH=$venv/bin:$PATH nice -n 19 cmake --build "$dir/build" -j 2 \
    --target ggml ggml-cpu ggml-base >>"$log" 2>&1
  b=$dir/build/ggml/src
  g++ -O2 -x c bench/ggml_gemv.c -x none -I"$src/ggml/include" "$b/libggml.a" \
    "$b/libggml-cpu.a" "$b/libggml-base.a" -fopenmp -lm -lpthread -o "$exe" >>"$log" 2>&1
fi

cargo build --release -q -p flexkern-cli
date -u +"# %Y-%m-%d %H:%M UTC"; uname -srm; grep -m1 'model name' /proc/cpuinfo || true
echo "# threads: $threads"
for round in $(seq "$rounds"); do
  for f in ${formats//,/ }; do
    echo "## round $round, $f: flexkern"
    ./target/release/flexkern bench gemv --formats "$f" --n "$ns" --k "$k" --reps "$reps" \
      --threads "$threads" | tail -n +3
    echo "## round $round, $f: llama.cpp (ggml CPU backend: format,N,K,layout,median_ms,GB/s)"
    # ggml spells the K-quants with a capital K.
    "$exe" "$(echo "$f" | sed -E 's/_k/_K/g')" "$ns" "$k" "$threads" "$reps" 512 | tail -n +2
  done
done
