#!/bin/bash
# Session 12 call a (H100): verify (the 4aa866d bad-input cases, the choose refactor, today's
# attention refactor); the decode step as a CUDA graph: verify-model (its decode steps replay
# the graph), greedy tokens graph vs eager, decode tok/s graph on/off alternating.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s12a; mkdir -p $O
date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
P="The three laws of robotics are"
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
echo "== verify-model smollm2 q4_0"; timeout 60 ./flexkern verify-model --device cuda --model /tmp/s.gguf > $O/vm.txt 2>&1; echo rc=$?; tail -3 $O/vm.txt
echo "== greedy tokens, graph vs eager (smollm2)"
timeout 30 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$P" -n 96 --temperature 0 --ctx 200 > $O/g.txt 2>$O/ge.txt; echo rc=$?; tail -2 $O/ge.txt
FLEXKERN_CUDA_GRAPH=0 timeout 30 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$P" -n 96 --temperature 0 --ctx 200 > $O/e.txt 2>$O/ee.txt; echo rc=$?
cmp $O/g.txt $O/e.txt && echo "identical text ($(wc -c < $O/g.txt) bytes)"
for s in smollm2-135m:q4_0 llama3-8b:q4_0 llama3-1b:q4_k_m llama3-8b:q8_0; do
  shape=${s%%:*}; f=${s##*:}
  timeout 60 ./flexkern synth-model --shape $shape --format $f --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > /dev/null 2>&1 || { echo "synth $s failed"; continue; }
  timeout 40 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$P" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1
  for g in 1 0 1 0; do
    FLEXKERN_CUDA_GRAPH=$g timeout 40 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$P" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t$g.txt; echo "$shape $f graph=$g rc=$? $(grep -h decode $O/r.txt | tail -1 | cut -c1-75)"
  done
  cmp -s $O/t1.txt $O/t0.txt && echo "  $s: greedy text identical graph/eager" || echo "  $s: greedy text DIFFERS graph/eager"
done
echo "== verify"; timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -20; tail -2 $O/verify.txt
