#!/bin/bash
# Session 16 call a (H100): Q4_K's unit decode without branches (one 16-byte head load, scales
# by byte permutes) and Q8_K activations in the pipelined register batches. A/B against the
# session-15 closing binary (GEMV unchanged since session 14): bench gemv --graph, 8B Q4_K_M
# and Q4_0 decode; then verify on the new binary.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s16a; mkdir -p $O
date -u +%FT%TZ
g() { grep -E "^(q8_0|q4_0|q4_k|q6_k|copy)" $1 | awk '{print $1,$2,$3,$4,$5,$6}' | tr '\n' ';'; echo; }
for r in 1 2; do
  for b in old new newpipe0; do
    bin=./flexkern; env=""; [ $b = old ] && bin=./flexkern_old; [ $b = newpipe0 ] && env="FLEXKERN_GEMV_PIPE=0"
    env $env $bin bench gemv --device cuda --graph --reps 20 --formats q4_k,q4_0,q8_0,q6_k --n 14336,4096 --k 4096 > $O/gemv_${b}_$r.txt 2>&1
    env $env $bin bench gemv --device cuda --graph --reps 20 --formats q4_k,q4_0,q6_k --n 4096 --k 14336 >> $O/gemv_${b}_$r.txt 2>&1
    echo "gemv $b $r: $(g $O/gemv_${b}_$r.txt)"
  done
done
S="The three laws of robotics are"
for f in q4_k_m q4_0; do
  timeout 200 ./flexkern synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1
  timeout 60 ./flexkern_old run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1
  for r in 1 2; do
    for b in old new newpipe0; do
      [ $f = q4_0 ] && [ $b = newpipe0 ] && continue
      bin=./flexkern; env=""; [ $b = old ] && bin=./flexkern_old; [ $b = newpipe0 ] && env="FLEXKERN_GEMV_PIPE=0"
      env $env timeout 60 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/text_${f}_$b.txt
      echo "8b $f $b $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | cut -c1-40)"
    done
  done
  cmp $O/text_${f}_old.txt $O/text_${f}_new.txt && echo "$f: same greedy text old/new"
  rm -f /tmp/b.gguf
done
date -u +%FT%TZ
echo "== verify"; timeout 280 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -8; tail -2 $O/verify.txt
date -u +%FT%TZ
