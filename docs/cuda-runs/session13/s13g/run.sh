#!/bin/bash
# Session 13 call g (H100): the final binary's checks and GEMM figures. verify; verify-model
# (default and precise paths); compute-sanitizer memcheck on a run whose prompt takes the
# Hopper GEMM and the 16-bit-Q attention; bench gemv M 512 every tuned format; cuBLAS peer and
# the dense f16 peak.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s13g; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -12; grep -E "bad input" $O/verify.txt; tail -1 $O/verify.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
echo "== verify-model"; for p in default precise; do timeout 60 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s.gguf --tokens 64 > $O/vm_$p.txt 2>&1; echo "$p rc=$?: $(tail -1 $O/vm_$p.txt)"; done
P=$(python3 -c "print(('The three laws of robotics are a set of rules devised by the science fiction author Isaac Asimov. ' * 8)[:200])")
echo "== memcheck (200-token prompt: wgmma GEMM with TMA, 16-bit Q attention; 8 tokens)"
timeout 200 compute-sanitizer --tool memcheck --print-limit 5 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$P" -n 8 --temperature 0 --ctx 256 > $O/memcheck.txt 2>&1; echo rc=$?; grep -E "ERROR SUMMARY|prefill" $O/memcheck.txt | head -3
echo "== bench gemv M 512"
timeout 90 ./flexkern bench gemv --device cuda --m 512 --formats f16,bf16,q8_0,q4_0,q4_k,q6_k --reps 10 2>&1 | tee $O/bench512.txt | grep -E "^(copy|format|f16|bf16|q8_0|q4_0|q4_k|q6_k) "
timeout 60 ./flexkern bench gemv --device cuda --m 512 --formats f16,q8_0,q4_0,q4_k --n 4096 --k 14336 --reps 10 2>&1 | tee $O/bench512_down.txt | grep -E "^(f16|q8_0|q4_0|q4_k) "
echo "== peers"; timeout 90 python3 gemm_peers_cuda.py --m 512 2>&1 | tee $O/peers.txt
