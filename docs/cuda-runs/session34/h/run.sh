#!/bin/bash
# Session 34 call h: the closing binary (s34f = HEAD's release build) beside its peers in one
# call: bench gemv F16 / BF16 / Q8_0 / Q4_0 / Q4_K / Q6_K and cuBLAS (bench/gemv_peers_cuda.py
# --graph); 8B and SmolLM2 decode in BF16 and F16 beside PyTorch bf16 with a static KV cache
# and CUDA graphs (bench/model_peers_cuda.py, torch.compile reduce-overhead).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/h; mkdir -p $O
B=../../../../.devcarry/s34f/flexkern
date -u +%FT%TZ
S="The three laws of robotics are"
for m in "llama3-8b bf16" "llama3-8b f16" "smollm2-135m bf16 sb"; do set -- $m
  timeout 150 $B synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/${3:-$2}.gguf > /dev/null 2>&1 & done
timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 14336,4096 --k 4096 --formats f16,bf16,q8_0,q4_0,q4_k,q6_k > $O/gemv.log 2>&1; echo "gemv rc=$?"; grep -E "^(copy|f16|bf16|q8_0|q4_0|q4_k|q6_k) " $O/gemv.log | tr -s ' ' | cut -c1-90
PYTHONUNBUFFERED=1 timeout 120 python3 ../../../../bench/gemv_peers_cuda.py --graph > $O/gemv_peers.log 2>&1; echo "peers rc=$?"; tail -8 $O/gemv_peers.log
wait
date -u +%FT%TZ
run() { # model
  timeout 60 $B run --device cuda --model /tmp/$1.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$1 rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
}
for m in bf16 f16 sb bf16 f16 sb; do run $m; done
rm -f /tmp/bf16.gguf /tmp/f16.gguf /tmp/sb.gguf $O/out.log
date -u +%FT%TZ
cd ../../../../bench
PYTHONUNBUFFERED=1 timeout 150 python3 model_peers_cuda.py --shape smollm2-135m --tokens 128 --runs 3 --warmup 1 > $O/peer_smollm2.txt 2>&1; echo "peer smollm2 rc=$?"; tail -4 $O/peer_smollm2.txt
date -u +%FT%TZ
PYTHONUNBUFFERED=1 timeout 240 python3 model_peers_cuda.py --shape llama3-8b --tokens 128 --runs 3 --warmup 1 > $O/peer_8b.txt 2>&1; echo "peer 8b rc=$?"; tail -4 $O/peer_8b.txt
date -u +%FT%TZ
