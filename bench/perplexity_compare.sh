#!/usr/bin/env bash
# flexkern perplexity beside llama.cpp's on the same model and text, same window, same threads.
# llama.cpp is the build of bench/llamacpp_compare.sh (libraries only, built once into
# .cache/llamacpp); its side is bench/llamacpp_perplexity.c, llama-perplexity's definition
# against llama.h. The default text is the README of the llama-cpp-python source package on
# PyPI (the package that build comes from). Never in CI.
#
#   bench/perplexity_compare.sh [--model M.gguf] [--file TEXT] [--ctx N] [--chunks N] [--threads N]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
model="" file="" ctx=512 chunks=0 threads=$(nproc)
while [[ $# -gt 0 ]]; do
  case $1 in
    --model) model=$2; shift 2 ;;
    --file) file=$2; shift 2 ;;
    --ctx) ctx=$2; shift 2 ;;
    --chunks) chunks=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n $model ]] || model=$(bash bench/fetch_model.sh)
bash bench/llamacpp_compare.sh --build-only
dir=$root/.cache/llamacpp
src=$(ls -d "$dir"/src/llama_cpp_python-*/vendor/llama.cpp | head -n1)
[[ -n $file ]] || file=$(ls "$dir"/src/llama_cpp_python-*/README.md | head -n1)
exe=$dir/llamacpp_perplexity
if [[ ! -x $exe || bench/llamacpp_perplexity.c -nt $exe ]]; then
  b=$dir/build
  g++ -O2 -x c bench/llamacpp_perplexity.c -x none -I"$src/include" -I"$src/ggml/include" \
    "$b/src/libllama.a" "$b/ggml/src/libggml.a" "$b/ggml/src/libggml-cpu.a" \
    "$b/ggml/src/libggml-base.a" -fopenmp -lm -lpthread -o "$exe"
fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
cargo build --release -q -p flexkern-cli
chunk_args=()
[[ $chunks -gt 0 ]] && chunk_args=(--chunks "$chunks")
echo "model $model; text $file; ctx $ctx; threads $threads; $(date -u +%FT%TZ)"
echo "== llama.cpp"
"$exe" "$model" "$threads" "$file" "$ctx" "$chunks" 2>/dev/null | tee "$dir/ppl_llamacpp.json"
echo "== flexkern"
"$CARGO_TARGET_DIR/release/flexkern" perplexity --model "$model" --file "$file" --ctx "$ctx" \
  --threads "$threads" "${chunk_args[@]}" | tee "$dir/ppl_flexkern.txt"
python3 - "$dir/ppl_llamacpp.json" "$dir/ppl_flexkern.txt" <<'PY'
import json, re, sys
ref = json.load(open(sys.argv[1]))
m = re.search(r"PPL = ([0-9.]+) \+/- ([0-9.]+)", open(sys.argv[2]).read())
ppl, err = float(m.group(1)), float(m.group(2))
rel = ppl / ref["ppl"] - 1
print(f"llama.cpp PPL {ref['ppl']:.4f} +/- {ref['err']:.4f} | flexkern PPL {ppl:.4f} +/- {err:.4f} | "
      f"difference {100 * rel:+.3f} % ({'within' if abs(rel) <= 0.01 else 'OUTSIDE'} 1 %)")
sys.exit(0 if abs(rel) <= 0.01 else 1)
PY
