#!/bin/bash
# Session 20 call b: the streamed GEMV's pipeline with FK_SDEPTH register batches (depth 2 is
# the default; FLEXKERN_GEMV_DEPTH=3|4). verify on the new binary, verify --quick at depth 3;
# bench gemv old / d2 / d3 / d4 alternating; 8B Q4_0, Q4_K_M and SmolLM2 decode alternating.
# flexkern_old: call a's binary (HEAD 7bca520's kernels).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s20b; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2
FLEXKERN_GEMV_DEPTH=3 timeout 100 ./flexkern verify --device cuda --quick > $O/verify_d3.txt 2>&1; echo "verify d3 rc=$?"; grep -E "^verify:" $O/verify_d3.txt | tail -1
G=$O/gemv.txt
CFG=("old X=0" "new X=0" "new FLEXKERN_GEMV_DEPTH=3" "new FLEXKERN_GEMV_DEPTH=4")
for r in 1 2; do for c in "${CFG[@]}"; do set -- $c; b=$1; shift
  echo "== $r $b $*" >> $G
  env "$@" timeout 60 $([ $b = old ] && echo ./flexkern_old || echo ./flexkern) bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k,q6_k --n 14336,4096 --k 4096 >> $G 2>&1
  env "$@" timeout 60 $([ $b = old ] && echo ./flexkern_old || echo ./flexkern) bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k,q6_k --n 4096 --k 14336 >> $G 2>&1
  echo "gemv $r [$c] $(grep -E ' [0-9.]+% ' $G | tail -12 | grep -oE ' [0-9.]+% ' | tr -d '\n')"
done; done
timeout 90 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
timeout 90 ./flexkern synth-model --shape llama3-8b --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/k.gguf > /dev/null 2>&1
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
L=$O/runs.txt
for m in b k s; do for r in 1 2; do for c in "${CFG[@]}"; do set -- $c; b=$1; shift
  echo "== $m $r $c" >> $L
  env "$@" timeout 40 $([ $b = old ] && echo ./flexkern_old || echo ./flexkern) run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L
  echo "$m rc=$? [$c] $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done; done
rm -f $O/out.txt
date -u +%FT%TZ
