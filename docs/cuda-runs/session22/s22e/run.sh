#!/bin/bash
# Session 22 call e (H200), the closing code 7fee211 (call d verified it): the attention bench
# again (call a held the peers), every GEMV format through graph replays and the cuBLAS peer,
# 8B Q4_K_M and Q8_0 decode.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s22e; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 120 ./flexkern bench attn --device cuda > $O/bench.txt 2>&1; echo "bench rc=$?"
grep -E "^decode|^prefill|^chunked" $O/bench.txt | awk '{n=NF; print}' | cut -c1-120
timeout 120 ./flexkern bench gemv --device cuda --graph --formats f16,bf16,f32,q8_0,q4_0,q4_1,q5_0,q5_1,q2_k,q3_k,q4_k,q5_k,q6_k,iq4_nl,iq4_xs,mxfp4,mlx:4:64,mlx:8:64,mlx:3:32 > $O/gemv.txt 2>&1; echo "gemv rc=$?"
grep -E "^[a-z]" $O/gemv.txt | awk '{printf "  %s %s %s %s %s\n", $1,$2,$3,$5,$6}' | head -45
PYTHONUNBUFFERED=1 timeout 100 python3 gemv_peers_cuda.py --graph > $O/gemv_peers.txt 2>&1; echo "gemv peers rc=$?"; tail -8 $O/gemv_peers.txt
date -u +%FT%TZ
L=$O/runs.txt
for f in q4_k_m q8_0; do
  timeout 120 ./flexkern synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1; echo "synth $f rc=$?"
  for r in 1 2; do
    timeout 40 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > /dev/null 2>> $L; echo "$f rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'prefill:.*decode:[^|]*' | tail -1)"
  done
  rm -f /tmp/b.gguf
done
date -u +%FT%TZ
