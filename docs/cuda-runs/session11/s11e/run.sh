#!/bin/bash
# Session 11 call e (H100): where the decode step's time goes (FLEXKERN_CUDA_PROFILE=1), 8B and
# SmolLM2 shapes; A/B of the GEMV knobs read once (flexkern) against call d's binary (flexkern_d).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s11e; mkdir -p $O
date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
P="The three laws of robotics are"
for s in llama3-8b:q4_0 smollm2-135m:q4_0 llama3-8b:q4_k_m; do
  shape=${s%%:*}; f=${s##*:}
  echo "== $shape $f"; timeout 60 ./flexkern synth-model --shape $shape --format $f --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > $O/synth.txt 2>&1; echo rc=$?
  for b in flexkern flexkern_d; do timeout 60 ./$b run --device cuda --model /tmp/m.gguf --prompt "$P" -n 4 --temperature 0 --ctx 100 >/dev/null 2>&1; done
  for b in flexkern flexkern_d flexkern flexkern_d; do
    timeout 60 ./$b run --device cuda --model /tmp/m.gguf --prompt "$P" -n 64 --temperature 0 --ctx 100 2>$O/r.txt >/dev/null; echo "$shape $f $b rc=$? $(grep -h decode $O/r.txt | tail -1 | cut -c1-70)"
  done
  FLEXKERN_CUDA_PROFILE=1 timeout 60 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$P" -n 64 --temperature 0 --ctx 100 2>$O/r.txt >/dev/null; echo "profiled rc=$?"; grep -E "profile|decode" $O/r.txt | cut -c24-
done
