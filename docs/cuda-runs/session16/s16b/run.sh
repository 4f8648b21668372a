#!/bin/bash
# Session 16 call b (H100): planar Q6_K (codes and scales in the row, d in the side array) in
# the pipelined register GEMV, half a block a unit; Q4_K as in call a. A/B against the
# session-15 binary: bench gemv --graph, 8B Q4_K_M decode; the decode step per op
# (FLEXKERN_CUDA_PROFILE, graph off); verify, verify-model and memcheck on SmolLM2 Q4_K_M.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s16b; mkdir -p $O
date -u +%FT%TZ
g() { grep -E "^(q8_0|q4_0|q4_k|q6_k|copy)" $1 | awk '{print $1,$2,$3,$4,$5,$6}' | tr '\n' ';'; echo; }
for r in 1 2; do
  for b in old new; do
    bin=./flexkern; [ $b = old ] && bin=./flexkern_old
    $bin bench gemv --device cuda --graph --reps 20 --formats q6_k,q4_k,q4_0,q8_0 --n 14336,4096 --k 4096 > $O/gemv_${b}_$r.txt 2>&1
    $bin bench gemv --device cuda --graph --reps 20 --formats q6_k,q4_k --n 4096 --k 14336 >> $O/gemv_${b}_$r.txt 2>&1
    echo "gemv $b $r: $(g $O/gemv_${b}_$r.txt)"
  done
done
S="The three laws of robotics are"
timeout 200 ./flexkern synth-model --shape llama3-8b --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
for b in old new; do bin=./flexkern; [ $b = old ] && bin=./flexkern_old; timeout 60 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1; done
for r in 1 2; do
  for b in old new; do
    bin=./flexkern; [ $b = old ] && bin=./flexkern_old
    timeout 60 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/text_$b.txt
    echo "8b q4_k_m $b $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | cut -c1-40)"
  done
done
cmp $O/text_old.txt $O/text_new.txt && echo "q4_k_m: same greedy text old/new"
FLEXKERN_CUDA_PROFILE=1 FLEXKERN_CUDA_GRAPH=0 timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > /dev/null 2> $O/profile_q4_k_m.txt
rm -f /tmp/b.gguf
timeout 200 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
FLEXKERN_CUDA_PROFILE=1 FLEXKERN_CUDA_GRAPH=0 timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > /dev/null 2> $O/profile_q4_0.txt
rm -f /tmp/b.gguf
date -u +%FT%TZ
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -8; tail -2 $O/verify.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
for p in precise default; do timeout 60 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s.gguf --tokens 64 > $O/vm_$p.txt 2>&1; echo "verify-model q4_k_m $p rc=$?: $(tail -1 $O/vm_$p.txt)"; done
P=$(python3 -c "print(('The three laws of robotics are a set of rules devised by the science fiction author Isaac Asimov. ' * 8)[:200])")
timeout 150 compute-sanitizer --tool memcheck --print-limit 5 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$P" -n 8 --temperature 0 --ctx 256 > $O/memcheck.txt 2>&1; echo "memcheck q4_k_m rc=$?: $(grep -E 'ERROR SUMMARY' $O/memcheck.txt)"
cat $O/profile_q4_k_m.txt $O/profile_q4_0.txt > $O/profiles.txt; rm $O/profile_q4_k_m.txt $O/profile_q4_0.txt $O/r.txt $O/text_*.txt
date -u +%FT%TZ
