#!/bin/bash
# Session 24 call e (H200), the closing code: the attention bench (decode and prefill) with
# the PyTorch 2.11 peers (SDPA flash / cuDNN, compiled FlexAttention) in the same call, the
# prefill bench again after them; SmolLM2 decode.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s24e; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 120 ./flexkern bench attn --device cuda > $O/bench.txt 2>&1; echo "bench rc=$?"
date -u +%FT%TZ
PYTHONUNBUFFERED=1 timeout 100 python3 attention_peers_cuda.py > $O/peers.txt 2>&1; echo "peers rc=$?"
date -u +%FT%TZ
PYTHONUNBUFFERED=1 timeout 170 python3 prefill_peers_cuda.py >> $O/peers.txt 2>&1; echo "prefill peers rc=$?"
date -u +%FT%TZ
timeout 80 ./flexkern bench attn --device cuda --only prefill > $O/prefill_2.txt 2>&1; echo "prefill 2 rc=$?"
date -u +%FT%TZ
L=$O/runs.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
for r in 1 2; do
  timeout 40 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > /dev/null 2>> $L; echo "smollm2 rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1)"
done
date -u +%FT%TZ
grep -E "copy|^decode|^prefill|^chunked" $O/bench.txt | cut -c1-150
grep -E "^(prefill|chunked)" $O/prefill_2.txt | cut -c1-150
grep -E "matmul|flex|sdpa|copy|decode" $O/peers.txt | cut -c1-140 | head -40
