#!/bin/bash
# Session 12 call f (H100): the closing binary. verify, memcheck (verify --quick, a short
# sampled run), verify-model, a long generation that crosses the attention plan's split
# (graph re-recorded) graph vs eager, bench gemv, decode of synthetic models (graph on and off),
# and the PyTorch bf16 model peer (static cache, CUDA graphs) on two shapes.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s12f; mkdir -p $O
date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
P="The three laws of robotics are"
echo "== verify"; timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -20; tail -2 $O/verify.txt
echo "== memcheck verify --quick"; timeout 200 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.txt 2>&1; echo rc=$?; grep -E "^verify|ERROR SUMMARY" $O/memcheck.txt | tail -2
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
echo "== verify-model smollm2 q4_0"; timeout 60 ./flexkern verify-model --device cuda --model /tmp/s.gguf > $O/vm.txt 2>&1; echo rc=$?; tail -1 $O/vm.txt
echo "== memcheck short sampled run"; timeout 100 compute-sanitizer --tool memcheck ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$P" -n 8 --temperature 0.8 --seed 1 --ctx 64 > $O/mc_run.txt 2>&1; echo rc=$?; grep -E "ERROR SUMMARY" $O/mc_run.txt | tail -1
echo "== 700 tokens past the plan's split, graph vs eager"
timeout 60 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$P" -n 700 --temperature 0 --ctx 800 > /tmp/g.txt 2>/tmp/ge.txt; echo "graph rc=$? $(grep -h decode /tmp/ge.txt | tail -1 | cut -c1-75)"
FLEXKERN_CUDA_GRAPH=0 timeout 60 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$P" -n 700 --temperature 0 --ctx 800 > /tmp/e.txt 2>/tmp/ee.txt; echo "eager rc=$? $(grep -h decode /tmp/ee.txt | tail -1 | cut -c1-75)"
cmp /tmp/g.txt /tmp/e.txt && echo "identical text ($(wc -c < /tmp/g.txt) bytes)"
echo "== gemv"; timeout 60 ./flexkern bench gemv --device cuda --n 14336,4096 --k 4096 --reps 20 --formats f16,q8_0,q4_0,q4_k,q6_k > $O/gemv.txt 2>&1; timeout 40 ./flexkern bench gemv --device cuda --n 4096 --k 14336 --reps 20 --formats q8_0,q4_0,q4_k,q6_k >> $O/gemv.txt 2>&1; grep -E "^(copy|f16|q)" $O/gemv.txt | cut -c1-62
for s in llama3-8b:q4_0 llama3-8b:q8_0 llama3-1b:q4_k_m smollm2-135m:q4_0 llama3-8b:f16; do
  shape=${s%%:*}; f=${s##*:}
  timeout 90 ./flexkern synth-model --shape $shape --format $f --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > /dev/null 2>&1 || { echo "synth $s failed"; continue; }
  timeout 60 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$P" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1
  for g in 1 1 0 1; do
    FLEXKERN_CUDA_GRAPH=$g timeout 60 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$P" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >/dev/null; echo "$shape $f graph=$g rc=$? $(grep -h decode $O/r.txt | tail -1 | cut -c1-75)"
  done
done
rm -f /tmp/m.gguf
echo "== PyTorch bf16 peers"
for shape in smollm2-135m llama3-8b; do PYTHONUNBUFFERED=1 timeout 200 python3 model_peers_cuda.py --shape $shape --tokens 128 --runs 3 --warmup 1 > $O/peer_$shape.txt 2>&1; echo "$shape rc=$?"; tail -4 $O/peer_$shape.txt; done
