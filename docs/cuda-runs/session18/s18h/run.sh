#!/bin/bash
# Session 18 call h (H100), the closing code 2875afb: compute-sanitizer memcheck and synccheck
# on a short SmolLM2 run (paged decode with part-dead last tiles, the staging path changed).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s18h; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
timeout 40 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 8 --temperature 0 --ctx 160 > /dev/null 2> $O/run.txt; echo "run rc=$?: $(grep -o 'decode:.*' $O/run.txt)"
for tool in synccheck memcheck; do
  FLEXKERN_CUDA_GRAPH=0 timeout 75 compute-sanitizer --tool $tool ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 8 --temperature 0 --ctx 160 > $O/$tool.txt 2>&1; echo "$tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/$tool.txt | tail -1)"
done
rm -f /tmp/s.gguf
date -u +%FT%TZ
