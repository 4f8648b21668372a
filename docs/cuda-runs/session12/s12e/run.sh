#!/bin/bash
# Session 12 call e (H100): balanced warp spans in the streamed GEMV. verify, memcheck of verify
# --quick and of a short run, verify-model, bench gemv A/B against call d's binary (flexkern_d)
# beside cuBLAS, decode A/B against call d.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s12e; mkdir -p $O
date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
P="The three laws of robotics are"
echo "== verify"; timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -20; tail -2 $O/verify.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
echo "== verify-model smollm2 q4_0"; timeout 60 ./flexkern verify-model --device cuda --model /tmp/s.gguf > $O/vm.txt 2>&1; echo rc=$?; tail -1 $O/vm.txt
echo "== gemv A/B"
for b in flexkern flexkern_d flexkern flexkern_d; do
  timeout 60 ./$b bench gemv --device cuda --n 14336,4096 --k 4096 --reps 20 --formats f16,q8_0,q4_0,q4_k,q6_k > $O/gemv_$b.txt 2>&1
  timeout 40 ./$b bench gemv --device cuda --n 4096 --k 14336 --reps 20 --formats q8_0,q4_0,q4_k,q6_k >> $O/gemv_$b.txt 2>&1
  echo "-- $b"; grep -E "^(copy|f16|q)" $O/gemv_$b.txt | cut -c1-62
done
echo "== cuBLAS"; PYTHONUNBUFFERED=1 timeout 60 python3 gemv_peers_cuda.py > $O/peers.txt 2>&1; echo rc=$?; tail -6 $O/peers.txt
for s in llama3-8b:q4_0 llama3-8b:q8_0 llama3-1b:q4_k_m smollm2-135m:q4_0; do
  shape=${s%%:*}; f=${s##*:}
  timeout 60 ./flexkern synth-model --shape $shape --format $f --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > /dev/null 2>&1 || { echo "synth $s failed"; continue; }
  for b in flexkern flexkern_d; do timeout 40 ./$b run --device cuda --model /tmp/m.gguf --prompt "$P" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1; done
  for b in flexkern flexkern_d flexkern flexkern_d flexkern; do
    timeout 40 ./$b run --device cuda --model /tmp/m.gguf --prompt "$P" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_$b.txt; echo "$shape $f $b rc=$? $(grep -h decode $O/r.txt | tail -1 | cut -c1-75)"
  done
  cmp -s $O/t_flexkern.txt $O/t_flexkern_d.txt && echo "  greedy text identical to call d" || echo "  greedy text differs from call d"
done
echo "== memcheck short run (smollm2)"; timeout 100 compute-sanitizer --tool memcheck ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$P" -n 8 --temperature 0.8 --seed 1 --ctx 64 > $O/mc_run.txt 2>&1; echo rc=$?; grep -E "ERROR SUMMARY" $O/mc_run.txt | tail -1
echo "== memcheck verify --quick"; timeout 200 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.txt 2>&1; echo rc=$?; grep -E "^verify|ERROR SUMMARY" $O/memcheck.txt | tail -3
