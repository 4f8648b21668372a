#!/bin/bash
# Session 14 call l (H100): the final binary (c1d31a6, = call j's): verify, verify-model,
# memcheck on short Q4_0 and Q8_0 runs (the planar direct GEMV), graph = eager over 600 tokens,
# bench gemv eager and graph at the issue's shapes, cuBLAS f16 peers eager and graphed.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s14l; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -12; tail -2 $O/verify.txt
P=$(python3 -c "print(('The three laws of robotics are a set of rules devised by the science fiction author Isaac Asimov. ' * 8)[:200])")
for f in q4_0 q8_0; do
  timeout 30 ./flexkern synth-model --shape smollm2-135m --format $f --tokenizer bytes --vocab 49152 --out /tmp/s_$f.gguf > /dev/null 2>&1
  for p in precise default; do timeout 60 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s_$f.gguf --tokens 64 > $O/vm_${f}_$p.txt 2>&1; echo "verify-model $f $p rc=$?: $(tail -1 $O/vm_${f}_$p.txt)"; done
  timeout 150 compute-sanitizer --tool memcheck --print-limit 5 ./flexkern run --device cuda --model /tmp/s_$f.gguf --prompt "$P" -n 8 --temperature 0 --ctx 256 > $O/memcheck_$f.txt 2>&1; echo "memcheck $f rc=$?: $(grep -E 'ERROR SUMMARY' $O/memcheck_$f.txt)"
done
S="The three laws of robotics are"
timeout 60 ./flexkern run --device cuda --model /tmp/s_q4_0.gguf --prompt "$S" -n 600 --temperature 0 --ctx 700 > /tmp/g.txt 2>$O/g.txt
FLEXKERN_CUDA_GRAPH=0 timeout 60 ./flexkern run --device cuda --model /tmp/s_q4_0.gguf --prompt "$S" -n 600 --temperature 0 --ctx 700 > /tmp/e.txt 2>/dev/null
cmp /tmp/g.txt /tmp/e.txt && echo "graph = eager over 600 tokens ($(wc -c < /tmp/g.txt) bytes); $(grep -o 'decode:.*' $O/g.txt | cut -c1-40)"
for G in "" "--graph"; do
  ./flexkern bench gemv --device cuda $G --reps 20 --formats f16,q8_0,q4_0,q4_k,q6_k --n 14336,4096 --k 4096 > $O/gemv$G.txt 2>&1
  ./flexkern bench gemv --device cuda $G --reps 20 --formats q8_0,q4_0,q4_k,q6_k --n 4096 --k 14336 >> $O/gemv$G.txt 2>&1
  echo "== bench gemv $G"; grep -E "^(f16|q8_0|q4_0|q4_k|q6_k|copy)" $O/gemv$G.txt | awk '{print $1,$2,$3,$4,$5,$6}' | tr '\n' ';'; echo
done
PYTHONUNBUFFERED=1 timeout 120 python3 gemv_peers_cuda.py --graph > $O/peers.txt 2>&1; echo "== peers"; cat $O/peers.txt | tail -10
date -u +%FT%TZ
