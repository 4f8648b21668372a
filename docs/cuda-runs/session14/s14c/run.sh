#!/bin/bash
# Session 14 call c (H100): planar Q4_0 / Q8_0 with the register-direct streamed GEMV. verify,
# verify-model, bench gemv (graph) new against old, 8B decode new against old (alternating).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s14c; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -12; tail -2 $O/verify.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
for p in precise default; do timeout 60 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s.gguf --tokens 64 > $O/vm_$p.txt 2>&1; echo "verify-model $p rc=$?: $(tail -1 $O/vm_$p.txt)"; done
B() { # label binary env...
  local l=$1 bin=$2; shift 2
  env "$@" $bin bench gemv --device cuda --graph --reps 20 --formats q8_0,q4_0 --n 14336,4096 --k 4096 > $O/g_$l.txt 2>&1
  env "$@" $bin bench gemv --device cuda --graph --reps 20 --formats q8_0,q4_0 --n 4096 --k 14336 >> $O/g_$l.txt 2>&1
  echo "== $l"; grep -E "^(q8_0|q4_0|copy)" $O/g_$l.txt | awk '{print $1,$2,$3,$4,$6,$7}' | tr '\n' ';'; echo
}
B old ./flexkern_old X=1
B new ./flexkern X=1
B new_fit4 ./flexkern FLEXKERN_GEMV_FIT=4
B new_fit2 ./flexkern FLEXKERN_GEMV_FIT=2
grep -h "kernel\|stream" $O/g_new.txt | awk '{print $NF}' | sort -u | head -4
S="The three laws of robotics are"
for f in q4_0 q8_0; do
  timeout 150 ./flexkern synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for bin in ./flexkern_old ./flexkern; do timeout 60 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1; done
  for r in 1 2; do
    for v in "./flexkern_old X=1" "./flexkern X=1" "./flexkern FLEXKERN_GEMV_FIT=4"; do
      set -- $v
      env $2 timeout 60 $1 run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_$(basename $1).txt
      echo "8b $f [$v] $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | cut -c1-40)"
    done
  done
  cmp -s $O/t_flexkern.txt $O/t_flexkern_old.txt && echo "8b $f: same text old/new" || echo "8b $f: TEXT DIFFERS old/new"
  rm -f /tmp/b.gguf
done
date -u +%FT%TZ
