#!/bin/bash
# Session 22 call a: the first H200. The session-21 closing code (06f3a62) re-measured there:
# verify; decode + prefill attention bench with the PyTorch peers; GEMV (graph); SmolLM2 and
# 8B Q4_0 decode through the graph and the 8B step timeline.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s22a; mkdir -p $O
date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader
S="The three laws of robotics are"
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2; grep -iE " fail" $O/verify.txt | head -5
timeout 120 ./flexkern bench attn --device cuda > $O/bench.txt 2>&1; echo "bench rc=$?"
timeout 100 python3 attention_peers_cuda.py > $O/peers.txt 2>&1; echo "peers rc=$?"
timeout 150 python3 prefill_peers_cuda.py >> $O/peers.txt 2>&1; echo "prefill peers rc=$?"
timeout 90 ./flexkern bench gemv --device cuda --graph --formats f16,q8_0,q4_0,q4_k,q6_k --n 14336,4096 --k 4096 > $O/gemv.txt 2>&1; echo "gemv rc=$?"
date -u +%FT%TZ
L=$O/runs.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
timeout 90 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
for r in 1 2; do for m in s b; do
  timeout 40 ./flexkern run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > /dev/null 2>> $L; echo "$m rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1)"
done; done
FLEXKERN_CUDA_TRACE=step timeout 100 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 48 --temperature 0 --ctx 160 > /dev/null 2> $O/step_8b.txt; echo "step rc=$?"
tr '\r' '\n' < $O/step_8b.txt | grep -v "^\s*$" | grep -E "fk_|replay 32" | cut -c1-150 | head -12
date -u +%FT%TZ
grep -E "copy|^decode|^prefill|^chunked" $O/bench.txt | cut -c1-160
grep -E "matmul|flex|sdpa|copy|decode" $O/peers.txt | cut -c1-140 | head -40
grep -vE "^\s*$" $O/gemv.txt | tail -14 | cut -c1-150
