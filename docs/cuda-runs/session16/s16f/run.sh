#!/bin/bash
# Session 16 call f (H100): call e's decode attention with programmatic dependent launch lost
# 2-3 % on 8B decode. Three binaries, alternating: "a" = attention waits at its start and lets
# the next kernel launch only before its epilogue; "b" = attention without it (call d's kernels
# plus top-k's block scan); "d" = call d's binary. Verify a and b, then decode.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s16f; mkdir -p $O
date -u +%FT%TZ
for b in a b; do echo "== verify $b"; timeout 200 ./flexkern_$b verify --device cuda > $O/verify_$b.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify_$b.txt | head -8; tail -2 $O/verify_$b.txt; done
S="The three laws of robotics are"
run() { timeout 60 ./flexkern_$1 run --device cuda --model /tmp/b.gguf --prompt "$S" -n $2 --temperature 0 --ctx 160 2>$O/r.txt >$O/text_$1.txt; }
for sf in "llama3-8b q4_0" "llama3-8b q8_0" "llama3-8b q4_k_m" "smollm2-135m q4_0"; do
  set -- $sf
  timeout 120 ./flexkern_a synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for b in a b d; do run $b 4; done
  for r in 1 2 3; do
    line="$1 $2 round $r:"
    for b in a b d; do run $b 128; line="$line $b $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | awk '{print $4}')"; done
    echo "$line"
  done
  cmp -s $O/text_a.txt $O/text_d.txt && cmp -s $O/text_b.txt $O/text_d.txt && echo "$2: same greedy text a/b/d" || echo "$2: greedy text differs"
  rm -f /tmp/b.gguf
done
rm -f $O/r.txt $O/text_*.txt
date -u +%FT%TZ
