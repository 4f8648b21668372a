#!/bin/bash
# Session 18 call g (H100), the closing binary: the host path of an attention call (hooks'
# source written only when planning; one mask evaluation per wholly visible sequence). verify,
# verify-model, a SmolLM2 run; bench attn decode new / old (3090b02) alternating.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s18g; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -5; tail -2 $O/verify.txt
S="The three laws of robotics are"
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
for p in precise default; do timeout 60 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s.gguf --tokens 64 > $O/vm_$p.txt 2>&1; echo "verify-model q4_k_m $p rc=$?: $(tail -1 $O/vm_$p.txt)"; done
timeout 25 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > /dev/null 2> $O/run_s.txt; echo "smollm2 run rc=$?: $(grep -o 'decode:.*' $O/run_s.txt)"
date -u +%FT%TZ
i=0; for v in new old new old; do i=$((i+1)); bin=./flexkern_$v; [ $v = new ] && bin=./flexkern
  timeout 60 $bin bench attn --device cuda --only decode > $O/decode_${i}_$v.txt 2>&1; echo "bench decode $v rc=$?"
  grep -E "^decode" $O/decode_${i}_$v.txt | sed 's/  */ /g' | cut -d' ' -f2-7,9-10
  grep -E "^  decode" $O/decode_${i}_$v.txt | sed -E 's/^  (decode [^:]*):.*planned afresh in the call ([0-9.]+) ms, ([0-9.]+) %.*planning ([0-9.]+) us.*alone ([0-9.]+) ms, ([0-9.]+) %/  fresh \2 ms \3% host \4 us | kernels \5 ms \6%/'
done
rm -f /tmp/s.gguf
date -u +%FT%TZ
