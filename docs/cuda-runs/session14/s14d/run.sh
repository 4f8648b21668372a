#!/bin/bash
# Session 14 call d (H100): the direct streamed GEMV with rows walked in pairs and 128 bytes of
# loads a lane (FK_SR, FK_SUN), eight-step activation rounds. bench gemv (graph): old (s14a),
# call c's binary, new and knob variants; ncu instruction counts; 8B decode A/B.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s14d; mkdir -p $O
date -u +%FT%TZ
B() { # label binary env...
  local l=$1 bin=$2; shift 2
  env "$@" $bin bench gemv --device cuda --graph --reps 20 --formats q8_0,q4_0 --n 14336,4096 --k 4096 > $O/g_$l.txt 2>&1
  env "$@" $bin bench gemv --device cuda --graph --reps 20 --formats q8_0,q4_0 --n 4096 --k 14336 >> $O/g_$l.txt 2>&1
  echo "== $l"; grep -E "^(q8_0|q4_0|copy)" $O/g_$l.txt | awk '{print $1,$2,$3,$4,$6}' | tr '\n' ';'; echo
}
B old ./flexkern_old X=1
B c ./flexkern_c X=1
B new ./flexkern X=1
B sr1 ./flexkern FLEXKERN_GEMV_SR=1
B sun8 ./flexkern FLEXKERN_GEMV_SUN=8
B sr4 ./flexkern FLEXKERN_GEMV_SR=4 FLEXKERN_GEMV_SUN=2
B fit2 ./flexkern FLEXKERN_GEMV_FIT=2
B new2 ./flexkern X=1
grep -h "stream" $O/g_new.txt | awk '{print $NF}' | sort -u | head -4
for c in "q4_0 14336 4096" "q4_0 4096 14336"; do
  set -- $c
  timeout 60 ncu --metrics smsp__inst_executed.sum,dram__bytes_read.sum,gpu__time_duration.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__warps_issue_stalled_barrier_per_warp_active.pct,sm__warps_active.avg.pct_of_peak_sustained_active -k regex:fk_gemv --launch-skip 6 --launch-count 1 ./flexkern bench gemv --device cuda --reps 2 --formats $1 --n $2 --k $3 > $O/ncu_$1_$2_$3.txt 2>&1
  echo "ncu $c: $(grep -E 'inst_executed|dram__bytes|duration|long_score|barrier|warps_active' $O/ncu_$1_$2_$3.txt | awk '{print $1, $NF}' | tr '\n' ' ')"
done
S="The three laws of robotics are"
for f in q4_0 q8_0; do
  timeout 150 ./flexkern synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for bin in ./flexkern_old ./flexkern; do timeout 60 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1; done
  for r in 1 2; do
    for v in "./flexkern_old X=1" "./flexkern X=1" "./flexkern FLEXKERN_GEMV_FIT=2"; do
      set -- $v
      env $2 timeout 60 $1 run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_$(basename $1).txt
      echo "8b $f [$v] $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | cut -c1-40)"
    done
  done
  cmp -s $O/t_flexkern.txt $O/t_flexkern_old.txt && echo "8b $f: same text old/new" || echo "8b $f: TEXT DIFFERS old/new"
  rm -f /tmp/b.gguf
done
date -u +%FT%TZ
