#!/bin/bash
# Session 18 call f (H100): "new" = page lookups a stage ahead of their copies; "old" = 3090b02 (call e).

cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s18f; mkdir -p $O
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
done
grep -E "^  decode" $O/decode_3_new.txt | sed -E 's/^  (decode [^:]*): ([^ ]*) \(.* ([0-9]+) registers.*planned afresh in the call ([0-9.]+) ms, ([0-9.]+) %.*planning ([0-9.]+) us.*alone ([0-9.]+) ms, ([0-9.]+) %/\1 | regs \3 | fresh \4 ms \5% host \6 us | kernels \7 ms \8%/'
date -u +%FT%TZ
for sf in "llama3-8b q4_0 2"; do
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
rm -f $O/r.txt $O/t_*.txt /tmp/s.gguf
date -u +%FT%TZ
