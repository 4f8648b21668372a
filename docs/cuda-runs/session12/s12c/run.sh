#!/bin/bash
# Session 12 call c (H100): the fused decode (norm in the GEMV, RoPE + KV write in one launch,
# no merge for a sole partition): verify, verify-model, decode A/B against call b's binary
# (flexkern_b), graph on/off, and the ncu kernel list of one 8B step.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s12c; mkdir -p $O
date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
P="The three laws of robotics are"
echo "== verify"; timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -20; tail -2 $O/verify.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
echo "== verify-model smollm2 q4_0"; timeout 60 ./flexkern verify-model --device cuda --model /tmp/s.gguf > $O/vm.txt 2>&1; echo rc=$?; tail -1 $O/vm.txt
for s in llama3-8b:q4_0 smollm2-135m:q4_0 llama3-1b:q4_k_m llama3-8b:q8_0; do
  shape=${s%%:*}; f=${s##*:}
  timeout 60 ./flexkern synth-model --shape $shape --format $f --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > /dev/null 2>&1 || { echo "synth $s failed"; continue; }
  for b in flexkern flexkern_b; do timeout 40 ./$b run --device cuda --model /tmp/m.gguf --prompt "$P" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1; done
  for b in flexkern flexkern_b flexkern flexkern_b; do
    timeout 40 ./$b run --device cuda --model /tmp/m.gguf --prompt "$P" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_$b.txt; echo "$shape $f $b rc=$? $(grep -h decode $O/r.txt | tail -1 | cut -c1-75)"
  done
  FLEXKERN_CUDA_GRAPH=0 timeout 40 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$P" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_e.txt; echo "$shape $f flexkern graph=0 rc=$? $(grep -h decode $O/r.txt | tail -1 | cut -c1-75)"
  cmp -s $O/t_flexkern.txt $O/t_e.txt && echo "  greedy text identical graph/eager" || echo "  greedy text DIFFERS graph/eager"
  cmp -s $O/t_flexkern.txt $O/t_flexkern_b.txt && echo "  greedy text identical to call b" || echo "  greedy text differs from call b (fused norm rounding)"
  if [ "$shape:$f" = llama3-8b:q4_0 ]; then
    FLEXKERN_CUDA_GRAPH=0 timeout 150 ncu --csv --metrics gpu__time_duration.sum ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$P" -n 3 --temperature 0 --ctx 160 > $O/ncu.csv 2>/dev/null; echo "ncu rc=$?"
    python3 decode_kernels.py $O/ncu.csv 32
  fi
done
