#!/bin/bash
# Session 24 call b (H200): verify; lanes a 32-block in the Q8_0 prologue (FLEXKERN_GEMV_LANES,
# auto = the planner's) and the L2 prefetch issued after the wait (FLEXKERN_GEMV_PF_LATE=1),
# against the old prologue (LANES=1, PF=0): GEMV bench and 8B Q4_0 decode alternating.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s24b; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
FLEXKERN_GEMV_PF=0 timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E " fail" $O/verify.txt | head -5; tail -2 $O/verify.txt
date -u +%FT%TZ
arm() { # label env...
  local l=$1; shift
  echo "== $l" >> $O/gemv.txt
  env "$@" timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0 > $O/g.txt 2>&1
  env "$@" timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0 --n 4096 --k 14336 >> $O/g.txt 2>&1
  cat $O/g.txt >> $O/gemv.txt
  echo "$l: $(grep -E '^(q|f16)' $O/g.txt | awk '{printf "%s %s %s %s | ", $1,$2,$3,$6}')"
}
for r in 1 2; do
  arm old FLEXKERN_GEMV_PF=0 FLEXKERN_GEMV_LANES=1
  arm lanes FLEXKERN_GEMV_PF=0
  arm lanes+pflate FLEXKERN_GEMV_PF_LATE=1
done
arm lanes4 FLEXKERN_GEMV_PF=0 FLEXKERN_GEMV_LANES=4
arm lanes8 FLEXKERN_GEMV_PF=0 FLEXKERN_GEMV_LANES=8
date -u +%FT%TZ
timeout 120 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1; echo "synth rc=$?"
L=$O/runs.txt
run() { # label env...
  local l=$1; shift
  env "$@" timeout 40 ./flexkern run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L; echo "q4_0 $l rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
}
for r in 1 2; do
  run old FLEXKERN_GEMV_PF=0 FLEXKERN_GEMV_LANES=1
  run lanes FLEXKERN_GEMV_PF=0
  run lanes+pflate FLEXKERN_GEMV_PF_LATE=1
done
run lanes4 FLEXKERN_GEMV_PF=0 FLEXKERN_GEMV_LANES=4
run lanes8 FLEXKERN_GEMV_PF=0 FLEXKERN_GEMV_LANES=8
date -u +%FT%TZ
FLEXKERN_GEMV_PF=0 FLEXKERN_CUDA_TRACE=step,prologue timeout 60 ./flexkern run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > $O/trace_q4_0.txt 2>&1; echo "trace rc=$?"; grep -E "^\s+fk_|step:|launches" $O/trace_q4_0.txt | cut -c1-140 | head -14
date -u +%FT%TZ
