#!/bin/bash
# Session 18 call c (H100): "new" = a stage's page lookups shared by a warp (one round trip a
# stage), f16 operands for bf16 Q over 1-byte K/V, GEMV batches splitting a row's units evenly;
# "old" = ab90376 (main, the bench's layer call). verify; bench attn decode, bench gemv and 8B
# decode alternating; ncu of the B1 x 128k bf16 kernel (how long its SMs idle).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s18c; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -5; tail -2 $O/verify.txt
i=0; for v in old new new old; do i=$((i+1)); bin=./flexkern_$v; [ $v = new ] && bin=./flexkern
  timeout 60 $bin bench attn --device cuda --only decode > $O/decode_${i}_$v.txt 2>&1; echo "bench decode $v rc=$?"
  grep -E "^decode" $O/decode_${i}_$v.txt | sed 's/  */ /g' | cut -d' ' -f2-7,9-10
done
grep -E "^  decode" $O/decode_2_new.txt | sed -E 's/^  (decode [^:]*): ([^ ]*) \(.* ([0-9]+) registers.*planned afresh in the call ([0-9.]+) ms.*alone ([0-9.]+) ms, ([0-9.]+) %/\1 \2 regs \3 fresh \4 kernels \5 \6%/'
date -u +%FT%TZ
for v in old new old new; do bin=./flexkern_$v; [ $v = new ] && bin=./flexkern
  timeout 40 $bin bench gemv --device cuda --graph --reps 20 --formats q4_0,q4_k --n 14336,4096 --k 4096 > $O/g1_$v.txt 2>&1
  timeout 40 $bin bench gemv --device cuda --graph --reps 20 --formats q4_0,q4_k --n 4096 --k 14336 > $O/g2_$v.txt 2>&1
  echo "gemv $v: $(grep -hE '^(q4_0|q4_k)' $O/g1_$v.txt $O/g2_$v.txt | awk '{print $1"/"$2"x"$3, $6, $NF}' | tr '\n' ';')"
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
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 100 $NCU --section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis -k regex:fk_attention_mma --launch-skip 4 --launch-count 1 ./flexkern bench attn --device cuda --only "B1 L131072 Hq32/Hkv8 D128 bf16 contiguous" > $O/ncu_b1.txt 2>&1; echo "ncu b1 rc=$?"
grep -E "Duration|Elapsed Cycles|SM Active Cycles|DRAM Throughput|Memory Throughput|Achieved Occupancy|Waves Per SM|Registers Per|Block Limit" $O/ncu_b1.txt | head -14
date -u +%FT%TZ
