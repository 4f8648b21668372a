#!/bin/bash
# Session 27 call c: fp8 K's high pair converted in place (F2FP .H1, no shift). B1 x 128k decode:
# this binary, call b's, and pipeline knobs; ncu on the fp8 kernel; 8B / SmolLM2 decode against
# call a's binary (flexkern_old), three rounds.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s27c; mkdir -p $O
date -u +%FT%TZ
(timeout 100 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1; echo "synth q4_0 rc=$?"; timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo "synth smollm2 rc=$?") > $O/synth.txt 2>&1 &
for r in 1 2; do for cfg in "flexkern" "flexkern_b" "flexkern FLEXKERN_CUDA_MMA=128,3" "flexkern FLEXKERN_CUDA_MMA=64,3" "flexkern FLEXKERN_CUDA_MMA=128,2" "flexkern FLEXKERN_CUDA_MMA=256,2"; do
  set -- $cfg; b=$1; shift
  env "$@" timeout 60 ./$b bench attn --device cuda --only L131072 > $O/a.txt 2>&1
  echo "== $cfg round $r" >> $O/attn.txt; cat $O/a.txt >> $O/attn.txt
  echo "$cfg: $(grep -E '^decode' $O/a.txt | awk '{printf "%s ", $(NF-3)}') $(grep -E '^  decode' $O/a.txt | grep -o 'attn_[a-z0-9_]*' | sed 's/attn_//' | tr '\n' ' ')"
done; done
date -u +%FT%TZ
timeout 120 ncu --set full --import-source no -k regex:fk_attention --launch-skip 3 --launch-count 1 ./flexkern bench attn --device cuda --only "L131072 Hq32/Hkv8 D128 fp8e4m3 contiguous" > $O/ncu_fp8.txt 2>&1; echo "ncu rc=$?"
grep -E "Duration|DRAM Throughput|Issue Slots Busy|Eligible Warps|No Eligible|Warp Cycles Per Issued|Executed Instructions |highest-utilized|Stall" $O/ncu_fp8.txt | sed 's/  */ /g' | cut -c1-150 | head -20
date -u +%FT%TZ
wait; cat $O/synth.txt
S="The three laws of robotics are"
for r in 1 2 3; do for m in q4_0 s; do for b in flexkern flexkern_old; do
  timeout 30 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $O/runs.txt; echo "$m $b rc=$? $(tail -c 300 $O/runs.txt | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done; done
date -u +%FT%TZ
