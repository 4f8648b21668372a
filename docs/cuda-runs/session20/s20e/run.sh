#!/bin/bash
# Session 20 call e: RoPE and the KV append in the stacked QKV projection's epilogue
# (FK_SROPE; FLEXKERN_CUDA_ROPE_FUSE=0 turns it off). verify (full: the new bit-exact cases);
# verify-model on SmolLM2; decode A/B fused / separate / old binary (call a's) on 8B Q4_0,
# Q4_K_M and SmolLM2; the 8B step timeline fused; the decode attention bench.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s20e; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
bin() { [ $1 = old ] && echo ./flexkern_old || echo ./flexkern; }
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2; grep -E "norm_qkv_rope" $O/verify.txt | cut -c1-150
timeout 90 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
timeout 90 ./flexkern synth-model --shape llama3-8b --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/k.gguf > /dev/null 2>&1
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
timeout 120 ./flexkern verify-model --device cuda --model /tmp/s.gguf > $O/verify_model.txt 2>&1; echo "verify-model rc=$?"; tail -3 $O/verify_model.txt | cut -c1-200
L=$O/runs.txt
CFG=("new X=0" "new FLEXKERN_CUDA_ROPE_FUSE=0" "old X=0")
for m in b k s; do for r in 1 2; do for c in "${CFG[@]}"; do set -- $c; b=$1; shift
  echo "== $m $r $c" >> $L
  env "$@" timeout 40 $(bin $b) run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L
  echo "$m rc=$? [$c] $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done; done
rm -f $O/out.txt
FLEXKERN_CUDA_TRACE=step timeout 100 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 48 --temperature 0 --ctx 160 > /dev/null 2> $O/step_8b.txt; echo "step rc=$?"
tr '\r' '\n' < $O/step_8b.txt | grep -v "^\s*$" | grep -E "fk_|replay 32" | cut -c1-190
FLEXKERN_CUDA_TRACE=step timeout 100 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 48 --temperature 0 --ctx 160 > /dev/null 2> $O/step_smol.txt; echo "step smol rc=$?"
tr '\r' '\n' < $O/step_smol.txt | grep -v "^\s*$" | grep -E "replay 32" | cut -c1-190
date -u +%FT%TZ
