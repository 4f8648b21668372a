#!/bin/bash
# Session 14 call a (H100): where the streamed GEMV's fixed cost per launch goes. bench gemv
# eager against graph replay, then graph replay under the plan knobs (FLEXKERN_GEMV_FIT: blocks
# per SM the rings are sized for; _GRID: blocks per SM launched; _CHUNK: stage bytes), then 8B
# decode under the same knobs.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s14a; mkdir -p $O
date -u +%FT%TZ
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
B() { # label, env..., then bench args
  local l=$1; shift
  env "$@" ./flexkern bench gemv --device cuda --reps 20 --formats f16,q8_0,q4_0,q4_k,q6_k --n 14336,4096 --k 4096 $G > $O/g_$l.txt 2>&1
  env "$@" ./flexkern bench gemv --device cuda --reps 20 --formats q8_0,q4_0,q4_k,q6_k --n 4096 --k 14336 $G >> $O/g_$l.txt 2>&1
  echo "== $l $G"; grep -E "^(F16|Q8_0|Q4_0|Q4_K|Q6_K|copy)" $O/g_$l.txt | awk '{print $1,$2,$3,$4,$6}' | tr '\n' ';'; echo
}
G=""; B eager X=1
G="--graph"
B graph X=1
B grid2 FLEXKERN_GEMV_GRID=2
B fit4 FLEXKERN_GEMV_FIT=4
B fit4grid3 FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_GRID=3
B fit4grid2 FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_GRID=2
B chunk1k FLEXKERN_GEMV_CHUNK=1024
B fit3grid2c1k FLEXKERN_GEMV_FIT=3 FLEXKERN_GEMV_GRID=2 FLEXKERN_GEMV_CHUNK=1024
B fit6grid3 FLEXKERN_GEMV_FIT=6 FLEXKERN_GEMV_GRID=3
S="The three laws of robotics are"
for f in q4_0 q8_0; do
  timeout 150 ./flexkern synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1
  for r in 1 2; do
    for v in "X=1" "FLEXKERN_GEMV_GRID=2" "FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_GRID=3" "FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_GRID=2" "FLEXKERN_GEMV_CHUNK=1024"; do
      env $v timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >/dev/null
      echo "8b $f [$v] $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | cut -c1-40)"
    done
  done
  rm -f /tmp/b.gguf
done
date -u +%FT%TZ
