#!/bin/bash
# Session 17 call g (H100), the closing binary ("new": + norm weights prefetched to L1 before the
# GEMV's wait, 32-bit index math in fk_rope_kv_write): verify; bench attn decode (issue 13's
# shapes) against HEAD fa0e2e5 ("old"); decode against call f's binary ("f", 12e76dd).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s17g; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -5; tail -2 $O/verify.txt
for b in old new; do bin=./flexkern_$b; [ $b = new ] && bin=./flexkern; timeout 60 $bin bench attn --device cuda --only decode > $O/decode_$b.txt 2>&1; echo "bench decode $b rc=$?"; grep -E "^decode" $O/decode_$b.txt | sed 's/  */ /g' | cut -d' ' -f2-7,9-10; done
date -u +%FT%TZ
S="The three laws of robotics are"
for sf in "llama3-8b q4_0 2" "smollm2-135m q4_0 3"; do
  set -- $sf
  timeout 60 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for v in f new; do bin=./flexkern_$v; [ $v = new ] && bin=./flexkern; timeout 20 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1; done
  for r in $(seq 1 $3); do
    line="$1 $2 round $r:"
    for v in f new; do
      bin=./flexkern_$v; [ $v = new ] && bin=./flexkern
      timeout 20 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_$v.txt
      line="$line $v $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | awk '{print $4}')"
    done
    cmp -s $O/t_f.txt $O/t_new.txt && line="$line (same text)" || line="$line (text differs)"
    echo "$line" | tee -a $O/rounds.txt
  done
  rm -f /tmp/b.gguf
done
rm -f $O/r.txt $O/t_*.txt
date -u +%FT%TZ
