#!/usr/bin/env bash
# Decode on the GPU, batch 1, on synthetic models: `flexkern synth-model` + `flexkern run
# --device cuda` per weight format, beside the PyTorch bf16 peer (bench/model_peers_cuda.py:
# static KV cache, torch.compile reduce-overhead / CUDA graphs, with the copy bandwidth measured
# in the same process) on the same shape, vocabulary and token counts, in one run on one
# machine. Each log also goes to $OUT (else a temporary folder); a summary of the decode lines ends the output.
# Usage: bench/model_cuda.sh [SHAPE...]   (default: smollm2-135m llama3-1b llama3-8b)
#   FLEXKERN_BIN  the flexkern binary (default: flexkern on PATH)
#   FORMATS       weight formats of the flexkern runs (default: "f16 q8_0 q4_0 q4_k_m")
#   TOKENS        generated tokens (default 128; the issue's llama.cpp anchor also used 128)
#   MODEL_DIR     where the synthetic GGUF files are written, one at a time (default /tmp)
# An 8B F16 file is about 15 GB and its PyTorch compile takes a minute or two: run one shape
# per call where a call is time-limited.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin=${FLEXKERN_BIN:-flexkern}
logs=${OUT:-$(mktemp -d)}
log() { tee "$logs/$1"; }
shapes=("$@")
if [ ${#shapes[@]} -eq 0 ]; then shapes=(smollm2-135m llama3-1b llama3-8b); fi
read -r -a formats <<< "${FORMATS:-f16 q8_0 q4_0 q4_k_m}"
tokens=${TOKENS:-128}
dir=${MODEL_DIR:-/tmp}
vocab=49152 # SmolLM2's, as the issue's llama.cpp figures
# The byte tokenizer makes one token per byte: the peer gets a prompt of the same length.
prompt="The three laws of robotics are"
summary=()
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
for s in "${shapes[@]}"; do
  echo "== $s: PyTorch bf16 peer"
  PYTHONUNBUFFERED=1 python3 "$here/model_peers_cuda.py" --shape "$s" --tokens "$tokens" \
    --prompt-len "${#prompt}" --vocab "$vocab" 2>&1 | log "model_peers_$s.log" \
    || echo "(the peer failed: exit $?)"
  line=$(grep '^decode:' "$logs/model_peers_$s.log" || true)
  summary+=("$s pytorch-bf16  ${line:-see the log above}")
  for f in "${formats[@]}"; do
    file="$dir/flexkern-synth-$s-$f.gguf"
    echo "== $s $f: flexkern synth-model + run --device cuda"
    if ! "$bin" synth-model --shape "$s" --format "$f" --tokenizer bytes --vocab "$vocab" \
      --out "$file" 2>&1 | log "synth_${s}_$f.log"; then
      summary+=("$s flexkern-$f  synth-model failed")
      continue
    fi
    # The generated text (random weights) to stdout is dropped; the speed line is on stderr.
    # A first short run compiles the kernels (NVRTC, into the disk cache); the timed run then
    # loads them, as PyTorch's peer warms up before it is timed.
    "$bin" run --device cuda --model "$file" --prompt "$prompt" -n 4 --temperature 0 \
      --ctx $(( ${#prompt} + tokens )) >/dev/null 2>&1 || true
    "$bin" run --device cuda --model "$file" --prompt "$prompt" -n "$tokens" --temperature 0 \
      --ctx $(( ${#prompt} + tokens )) 2>&1 >/dev/null | log "run_cuda_${s}_$f.log" \
      || echo "(flexkern run failed: exit $?)"
    rm -f "$file"
    line=$(grep -o 'decode:.*' "$logs/run_cuda_${s}_$f.log" || true)
    summary+=("$s flexkern-$f  ${line:-see the log above}")
  done
done
echo "== summary (decode, batch 1)"
printf '%s\n' "${summary[@]}" | log model_cuda_summary.log
