#!/bin/bash
# Session 12 call h (H100): decode attention split below 512 keys (MIN_CHUNK 128 + a merge
# cost). verify; long generations graph vs eager; decode A/B at 600 tokens against call g.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s12h; mkdir -p $O
date -u +%FT%TZ
P="The three laws of robotics are"
echo "== verify"; timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -10; tail -2 $O/verify.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
timeout 40 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$P" -n 600 --temperature 0 --ctx 700 > /tmp/g.txt 2>/dev/null
FLEXKERN_CUDA_GRAPH=0 timeout 40 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$P" -n 600 --temperature 0 --ctx 700 > /tmp/e.txt 2>/dev/null
cmp /tmp/g.txt /tmp/e.txt && echo "graph = eager over 600 tokens ($(wc -c < /tmp/g.txt) bytes)"
timeout 40 ./flexkern_g run --device cuda --model /tmp/s.gguf --prompt "$P" -n 4 --temperature 0 --ctx 700 >/dev/null 2>&1
for b in flexkern flexkern_g flexkern flexkern_g; do timeout 40 ./$b run --device cuda --model /tmp/s.gguf --prompt "$P" -n 600 --temperature 0 --ctx 700 2>$O/r.txt >/dev/null; echo "smollm2 600 $b $(grep -h decode $O/r.txt | tail -1 | cut -c1-60)"; done
for b in flexkern flexkern_g flexkern flexkern_g; do timeout 40 ./$b run --device cuda --model /tmp/s.gguf --prompt "$P" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >/dev/null; echo "smollm2 128 $b $(grep -h decode $O/r.txt | tail -1 | cut -c1-60)"; done
