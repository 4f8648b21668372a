#!/bin/bash
# Session 29 call h: the streamed GEMV's register loads with an L2 prefetch hint
# (FLEXKERN_GEMV_L2, new; the decode attention gained 2-3 points from its 128-byte hint), two
# rounds alternating, k 4096 and 14336; 8B Q4_0 decode rounds at the default, 128 and 256.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/h; mkdir -p $O
F=../../../../.devcarry/s29h/flexkern
date -u +%FT%TZ
(timeout 120 $F synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1; echo "synth 8b rc=$?") > $O/synth.log 2>&1 &
run() {
  env $1 timeout 90 $F bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k $2 --formats q4_0,q4_k,q6_k,q8_0,f16 > $O/g.txt 2>&1
  echo "== $1 k $2" >> $O/gemv.log; cat $O/g.txt >> $O/gemv.log
  echo "$1 k$2: $(grep -E '^ *(q4_k|q4_0|q8_0|q6_k|f16) ' $O/g.txt | awk '{printf "%s %s %s | ", $1, $2, $6}')"
}
for r in 1 2; do for k in 4096 14336; do
  for s in "X=0" "FLEXKERN_GEMV_L2=64" "FLEXKERN_GEMV_L2=128" "FLEXKERN_GEMV_L2=256"; do run "$s" $k; done
done; done
rm -f $O/g.txt
date -u +%FT%TZ
wait; cat $O/synth.log
S="The three laws of robotics are"
for r in 1 2; do for s in "X=0" "FLEXKERN_GEMV_L2=128" "FLEXKERN_GEMV_L2=256"; do
  env $s timeout 30 $F run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "q4_0 $s rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done
rm -f $O/out.log
date -u +%FT%TZ
