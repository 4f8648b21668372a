#!/bin/bash
# Session 31 call a: the decode attention at a
# step's short contexts with more stages in flight (FLEXKERN_CUDA_MMA=tile,stages) and with
# the epilogue reading the plan from shared memory (experiment/attn-epilogue-smem, s30n);
# 8B Q4_0 and SmolLM2 Q4_0 decode with each, alternating, two rounds.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/a; mkdir -p $O
MAIN=../../../../.devcarry/s31a/flexkern; EPI=../../../../.devcarry/s30n/flexkern
date -u +%FT%TZ
for m in "llama3-8b q4_0" "smollm2-135m s"; do set -- $m
  timeout 150 $MAIN synth-model --shape $1 --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/$2.gguf > /dev/null 2>&1; echo "synth $2 rc=$?"; done
date -u +%FT%TZ
short() { grep -E "^decode B1" $1 | awk '{printf "%s ", $(NF-4)}'; }
for r in 1 2; do
  for v in "MAIN -" "MAIN 64,3" "MAIN 64,4" "MAIN 128,3" "EPI -"; do set -- $v
    if [ $2 = - ]; then E=""; else E="FLEXKERN_CUDA_MMA=$2"; fi
    env $E timeout 60 ${!1} bench attn --device cuda --only short > $O/s.log 2>&1; echo "short $1 $2 rc=$? ms: $(short $O/s.log)"; cat $O/s.log >> $O/short.log
  done
done
date -u +%FT%TZ
S="The three laws of robotics are"
for r in 1 2; do for m in q4_0 s; do
  for v in "MAIN -" "MAIN 64,3" "MAIN 64,4" "MAIN 128,3" "EPI -"; do set -- $v
    if [ $2 = - ]; then E=""; else E="FLEXKERN_CUDA_MMA=$2"; fi
    [ $m = s ] && [ $2 = 64,4 ] && continue
    [ $m = q4_0 ] && [ $2 = 128,3 ] && continue
    env $E timeout 40 ${!1} run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $1 $2 rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
  done
done; done
date -u +%FT%TZ
rm -f $O/out.log $O/s.log
date -u +%FT%TZ
