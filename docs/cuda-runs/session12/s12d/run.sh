#!/bin/bash
# Session 12 call d (H100): verify (the norm's shared-memory fix, device top-k, fused RoPE + KV
# write), verify-model, sampling runs, decode A/B against call c's binary (flexkern_c).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s12d; mkdir -p $O
date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
P="The three laws of robotics are"
echo "== verify"; timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -20; grep -E "largest|rope_kv_write|rmsnorm" $O/verify.txt | head -40 | cut -c1-110; tail -2 $O/verify.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
echo "== verify-model smollm2 q4_0"; timeout 60 ./flexkern verify-model --device cuda --model /tmp/s.gguf > $O/vm.txt 2>&1; echo rc=$?; tail -1 $O/vm.txt
echo "== sampling (temperature 0.8, top-k 40 on the device; top-k 0 downloads the row)"
for kk in 40 0; do timeout 30 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$P" -n 64 --temperature 0.8 --top-k $kk --seed 3 > $O/s$kk.txt 2>$O/se.txt; echo "top-k $kk rc=$? $(grep -h decode $O/se.txt | tail -1 | cut -c1-75) | $(head -c 60 $O/s$kk.txt | tr '\n' ' ')"; done
for s in llama3-8b:q4_0 smollm2-135m:q4_0 llama3-1b:q4_k_m; do
  shape=${s%%:*}; f=${s##*:}
  timeout 60 ./flexkern synth-model --shape $shape --format $f --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > /dev/null 2>&1 || { echo "synth $s failed"; continue; }
  for b in flexkern flexkern_c; do timeout 40 ./$b run --device cuda --model /tmp/m.gguf --prompt "$P" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1; done
  for b in flexkern flexkern_c flexkern flexkern_c; do
    timeout 40 ./$b run --device cuda --model /tmp/m.gguf --prompt "$P" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_$b.txt; echo "$shape $f $b rc=$? $(grep -h decode $O/r.txt | tail -1 | cut -c1-75)"
  done
  cmp -s $O/t_flexkern.txt $O/t_flexkern_c.txt && echo "  greedy text identical to call c" || echo "  greedy text DIFFERS from call c"
done
