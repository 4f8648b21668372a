#!/bin/bash
# Session 20 call d: the streamed GEMV with rows handed out at run time (FLEXKERN_GEMV_DYN=rows
# per chunk; 0 = the static split). verify with DYN=1 (full) and the default (quick); bench gemv
# and decode (8B Q4_0, Q4_K_M, SmolLM2) alternating old (call a's binary, HEAD's kernels),
# new static, DYN=1, DYN=2; the 8B Q4_0 step timeline at DYN=1.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s20d; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
bin() { [ $1 = old ] && echo ./flexkern_old || echo ./flexkern; }
FLEXKERN_GEMV_DYN=1 timeout 150 ./flexkern verify --device cuda > $O/verify_dyn1.txt 2>&1; echo "verify dyn1 rc=$?"; grep -E "^verify:|modules" $O/verify_dyn1.txt | tail -2
timeout 100 ./flexkern verify --device cuda --quick > $O/verify_quick.txt 2>&1; echo "verify quick rc=$?"; grep -E "^verify:" $O/verify_quick.txt | tail -1
G=$O/gemv.txt
CFG=("old X=0" "new X=0" "new FLEXKERN_GEMV_DYN=1" "new FLEXKERN_GEMV_DYN=2")
for r in 1 2; do for c in "${CFG[@]}"; do set -- $c; b=$1; shift
  echo "== $r $b $*" >> $G
  env "$@" timeout 60 $(bin $b) bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k --n 14336,4096 --k 4096 >> $G 2>&1
  env "$@" timeout 60 $(bin $b) bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k --n 4096 --k 14336 >> $G 2>&1
  echo "gemv $r [$c] $(grep -E ' [0-9.]+% ' $G | tail -9 | grep -oE ' [0-9.]+% ' | tr -d '\n')"
done; done
timeout 90 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
timeout 90 ./flexkern synth-model --shape llama3-8b --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/k.gguf > /dev/null 2>&1
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
L=$O/runs.txt
for m in b k s; do for r in 1 2; do for c in "${CFG[@]}"; do set -- $c; b=$1; shift
  echo "== $m $r $c" >> $L
  env "$@" timeout 40 $(bin $b) run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L
  echo "$m rc=$? [$c] $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done; done
rm -f $O/out.txt
FLEXKERN_GEMV_DYN=1 FLEXKERN_CUDA_TRACE=step timeout 100 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 48 --temperature 0 --ctx 160 > /dev/null 2> $O/step_dyn1.txt; echo "step rc=$?"
tr '\r' '\n' < $O/step_dyn1.txt | grep -v "^\s*$" | grep -E "fk_|replay 32" | cut -c1-190
date -u +%FT%TZ
