#!/bin/bash
# Session 20 call a: verify on the knobs-off binary (same module sources as 7bca520), the decode
# attention bench, then A/B knobs on 8B Q4_0 and SmolLM2 Q4_0 decode through the graph,
# alternating, two rounds; step timelines of three configs.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s20a; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench.txt 2>&1; echo "bench rc=$?"; grep -E "^decode" $O/bench.txt | awk '{printf "%s ", $(NF-2)} END {print ""}'
timeout 90 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
L=$O/runs.txt
CFG=("X=0" "FLEXKERN_CUDA_ATTN_PDL=1" "FLEXKERN_CUDA_ATTN_PDL=2" "FLEXKERN_GEMV_L2BULK=16" "FLEXKERN_CUDA_ATTN_PDL=1 FLEXKERN_GEMV_L2BULK=16" "FLEXKERN_CUDA_ATTN_PDL=1 FLEXKERN_GEMV_L2BULK=64" "FLEXKERN_CUDA_SPLIT=64,32")
for m in b s; do for r in 1 2; do for c in "${CFG[@]}"; do
  echo "== $m $r $c" >> $L
  env $c timeout 40 ./flexkern run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out_$m.txt 2>> $L
  echo "$m rc=$? [$c] $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out_$m.txt | cut -c1-8)"
done; done; done
rm -f $O/out_*.txt
i=0; for c in "X=0" "FLEXKERN_CUDA_ATTN_PDL=1" "FLEXKERN_CUDA_ATTN_PDL=1 FLEXKERN_GEMV_L2BULK=16"; do i=$((i+1))
  env $c FLEXKERN_CUDA_TRACE=step timeout 100 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 48 --temperature 0 --ctx 160 > /dev/null 2> $O/step$i.txt; echo "step$i rc=$? [$c]"
  tr '\r' '\n' < $O/step$i.txt | grep -v "^\s*$" | grep -E "fk_|replay 32" | cut -c1-150
done
date -u +%FT%TZ
