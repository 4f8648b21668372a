#!/bin/bash
# Session 16 call g (H100): the closing binary (ce0ed15): ncu kernel durations of one decode
# step (graph off, caches and clocks as they are) for 8B Q4_0 and SmolLM2-135M Q4_0, for the
# next session's plan.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s16g; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for sf in "llama3-8b q4_0 32" "smollm2-135m q4_0 30"; do
  set -- $sf
  timeout 120 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1
  FLEXKERN_CUDA_GRAPH=0 timeout 150 $NCU --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 3 --temperature 0 --ctx 160 > $O/ncu_$1.csv 2>/dev/null; echo "$1 ncu rc=$?"
  python3 decode_kernels.py $O/ncu_$1.csv $3 > $O/step_$1.txt 2>&1; head -30 $O/step_$1.txt; gzip -f $O/ncu_$1.csv
  rm -f /tmp/b.gguf
done
date -u +%FT%TZ
