#!/bin/bash
# Session 13 call a (H100): the prompt GEMM on tensor cores. verify (GEMM cases); verify-model
# on the default path; bench gemv at M 512 and the GEMM/GEMV crossover; cuBLAS peer and the
# dense f16 peak; the 8B Q4_0 prompt rate (512 tokens) GEMM vs GEMV.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s13a; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -12; grep -i "tensor cores" $O/verify.txt | sort -t' ' -k1 | head -3; tail -2 $O/verify.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
echo "== verify-model default path"; timeout 60 ./flexkern verify-model --device cuda --gpu-path default --model /tmp/s.gguf --tokens 32 > $O/vm.txt 2>&1; echo rc=$?; tail -1 $O/vm.txt
echo "== bench gemv M 512"
timeout 60 ./flexkern bench gemv --device cuda --m 512 --formats f16,q8_0,q4_0,q4_k,q6_k --reps 10 2>&1 | tee $O/bench512.txt | grep -v "^module\|load" | tail -12
timeout 40 ./flexkern bench gemv --device cuda --m 512 --formats f16,q4_0 --n 4096 --k 14336 --reps 10 2>&1 | grep -E "^(f16|q4_0)"
echo "== crossover (Q4_0 / Q8_0 14336 x 4096): GEMV vs GEMM"
for m in 2 4 8 16 32; do for g in 0 1; do
  r=$(FLEXKERN_GEMM_MIN_M=$([ $g = 1 ] && echo 1 || echo 100000) timeout 30 ./flexkern bench gemv --device cuda --m $m --formats q4_0,q8_0 --n 14336 --reps 10 2>&1 | grep -E "^(q4_0|q8_0)" | awk '{print $1, $4}' | tr '\n' ' ')
  echo "m $m gemm=$g: $r"; done; done
echo "== peers"; timeout 90 python3 gemm_peers_cuda.py --m 512 2>&1 | tee $O/peers.txt
echo "== 8B Q4_0 prompt 512"
P=$(python3 -c "print(('The three laws of robotics are a set of rules devised by the science fiction author Isaac Asimov. ' * 8)[:511])")
timeout 120 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1; ls -la /tmp/b.gguf
timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$P" -n 4 --temperature 0 --ctx 600 >/dev/null 2>&1
for g in 1 0 1 0; do FLEXKERN_GEMM=$g timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$P" -n 16 --temperature 0 --ctx 600 2>$O/r.txt >/dev/null; echo "8b q4_0 gemm=$g $(grep -h -o 'prefill.*' $O/r.txt | tail -1 | cut -c1-90)"; done
