#!/bin/bash
# Session 18 call a (H100): verify the new binary (GEMV batches across row ends; bench attn's
# layer call); bench attn decode; fp8 paged with a 256-byte L2 prefetch (knob); bench gemv and
# 8B decode old (s17 closing f9f0091) against new, alternating.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s18a; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -5; tail -2 $O/verify.txt
timeout 40 ./flexkern bench attn --device cuda --only decode > $O/decode_new.txt 2>&1; echo "bench decode rc=$?"; grep -E "^decode|planned" $O/decode_new.txt | sed 's/  */ /g' | cut -c1-400
FLEXKERN_CUDA_MMA=128,2,0,256 timeout 30 ./flexkern bench attn --device cuda --only fp8 > $O/fp8_l256.txt 2>&1; echo "fp8 l256 rc=$?"; grep -E "^decode" $O/fp8_l256.txt | sed 's/  */ /g'
date -u +%FT%TZ
for v in old new old new; do bin=./flexkern_$v; [ $v = new ] && bin=./flexkern
  timeout 40 $bin bench gemv --device cuda --graph --reps 20 --formats q4_0,q4_k,q8_0 --n 14336,4096 --k 4096 > $O/g1_$v.txt 2>&1
  timeout 40 $bin bench gemv --device cuda --graph --reps 20 --formats q4_0,q4_k --n 4096 --k 14336 > $O/g2_$v.txt 2>&1
  echo "gemv $v: $(grep -hE '^(q4_0|q4_k|q8_0)' $O/g1_$v.txt $O/g2_$v.txt | awk '{print $1"/"$2"x"$3, $6}' | tr '\n' ';')"
done
date -u +%FT%TZ
S="The three laws of robotics are"
for sf in "llama3-8b q4_0 3" "llama3-8b q4_k_m 3"; do
  set -- $sf
  timeout 120 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for v in old new; do bin=./flexkern_$v; [ $v = new ] && bin=./flexkern; timeout 25 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1; done
  for r in $(seq 1 $3); do
    line="$1 $2 round $r:"
    for v in old new; do
      bin=./flexkern_$v; [ $v = new ] && bin=./flexkern
      timeout 25 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_$v.txt
      line="$line $v $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | awk '{print $4}')"
    done
    cmp -s $O/t_old.txt $O/t_new.txt && line="$line (same text)" || line="$line (text differs)"
    echo "$line" | tee -a $O/rounds.txt
  done
  rm -f /tmp/b.gguf
done
rm -f $O/r.txt $O/t_*.txt
date -u +%FT%TZ
