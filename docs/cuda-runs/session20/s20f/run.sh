#!/bin/bash
# Session 20 call f, the closing code: verify; verify-model (SmolLM2 synth); decode A/B of the
# fused QKV + RoPE + KV append (the epilogue's inputs now in registers and shared memory)
# against FLEXKERN_CUDA_ROPE_FUSE=0 and call a's binary (7bca520's kernels); step timelines;
# the decode attention bench with the PyTorch peers between two runs.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s20f; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
bin() { [ $1 = old ] && echo ./flexkern_old || echo ./flexkern; }
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2; grep -E "norm_qkv_rope" $O/verify.txt | cut -c1-150
timeout 90 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
timeout 120 ./flexkern verify-model --device cuda --model /tmp/s.gguf > $O/verify_model.txt 2>&1; echo "verify-model rc=$?"; tail -1 $O/verify_model.txt | cut -c1-200
L=$O/runs.txt
CFG=("new X=0" "new FLEXKERN_CUDA_ROPE_FUSE=0" "old X=0")
for m in b s; do for r in 1 2; do for c in "${CFG[@]}"; do set -- $c; b=$1; shift
  echo "== $m $r $c" >> $L
  env "$@" timeout 40 $(bin $b) run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L
  echo "$m rc=$? [$c] $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done; done
rm -f $O/out.txt
for m in b s; do
  FLEXKERN_CUDA_TRACE=step timeout 100 ./flexkern run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 48 --temperature 0 --ctx 160 > /dev/null 2> $O/step_$m.txt; echo "step $m rc=$?"
  tr '\r' '\n' < $O/step_$m.txt | grep -v "^\s*$" | grep -E "fk_|replay 32" | cut -c1-190
done
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench1.txt 2>&1; echo "bench1 rc=$?"; grep -E '^decode' $O/bench1.txt | grep -oE '[0-9.]+%' | tr '\n' ' '; echo
timeout 120 python3 attention_peers_cuda.py > $O/peers.txt 2>&1; echo "peers rc=$?"; grep -E "decode|copy" $O/peers.txt | awk '{print $NF, $(NF-3)}' | tr '\n' ' '; echo
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench2.txt 2>&1; echo "bench2 rc=$?"; grep -E '^decode' $O/bench2.txt | grep -oE '[0-9.]+%' | tr '\n' ' '; echo
date -u +%FT%TZ
