#!/bin/bash
# Session 14 call k (H100): Q4_K in the direct streamed GEMV's batches (LW words: head and
# codes). verify, verify-model (Q4_0, Q4_K_M), memcheck (Q4_K_M run), bench gemv (graph) old /
# j / new, 8B decode Q4_K_M and Q4_0 alternating old / j / new.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s14k; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -12; tail -2 $O/verify.txt
P=$(python3 -c "print(('The three laws of robotics are a set of rules devised by the science fiction author Isaac Asimov. ' * 8)[:200])")
for f in q4_0 q4_k_m; do
  timeout 30 ./flexkern synth-model --shape smollm2-135m --format $f --tokenizer bytes --vocab 49152 --out /tmp/s_$f.gguf > /dev/null 2>&1
  for p in precise default; do timeout 60 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s_$f.gguf --tokens 64 > $O/vm_${f}_$p.txt 2>&1; echo "verify-model $f $p rc=$?: $(tail -1 $O/vm_${f}_$p.txt)"; done
done
timeout 150 compute-sanitizer --tool memcheck --print-limit 5 ./flexkern run --device cuda --model /tmp/s_q4_k_m.gguf --prompt "$P" -n 8 --temperature 0 --ctx 256 > $O/memcheck.txt 2>&1; echo "memcheck q4_k_m rc=$?: $(grep -E 'ERROR SUMMARY' $O/memcheck.txt)"
B() { # label binary env...
  local l=$1 bin=$2; shift 2
  env "$@" $bin bench gemv --device cuda --graph --reps 20 --formats f16,q8_0,q4_0,q4_k,q6_k --n 14336,4096 --k 4096 > $O/g_$l.txt 2>&1
  env "$@" $bin bench gemv --device cuda --graph --reps 20 --formats q8_0,q4_0,q4_k,q6_k --n 4096 --k 14336 >> $O/g_$l.txt 2>&1
  echo "== $l"; grep -E "^(f16|q8_0|q4_0|q4_k|q6_k|copy)" $O/g_$l.txt | awk '{print $1,$2,$3,$4,$6}' | tr '\n' ';'; echo
}
B old ./flexkern_old X=1
B j ./flexkern_j X=1
B new ./flexkern X=1
grep -h "stream" $O/g_new.txt | awk '{print $NF}' | sort -u
S="The three laws of robotics are"
for sf in "llama3-8b q4_k_m" "llama3-8b q4_0"; do
  set -- $sf
  timeout 150 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for bin in ./flexkern_old ./flexkern_j ./flexkern; do timeout 60 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1; done
  for r in 1 2; do for bin in ./flexkern_old ./flexkern_j ./flexkern; do
    timeout 60 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_$(basename $bin).txt
    echo "$1 $2 decode128 [$bin] $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | cut -c1-40)"
  done; done
  cmp -s $O/t_flexkern.txt $O/t_flexkern_old.txt && echo "$1 $2: same text old/new" || echo "$1 $2: TEXT DIFFERS old/new"
  rm -f /tmp/b.gguf
done
date -u +%FT%TZ
