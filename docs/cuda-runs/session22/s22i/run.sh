#!/bin/bash
# Session 22 call i (H200): the register batches' loads from per-batch row bases with
# immediate offsets (load_at). verify; bench gemv against call h's binary (e6f29ba),
# alternating; 8B Q4_0 / Q4_K_M and SmolLM2 decode against it.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s22i; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2; grep -iE " fail" $O/verify.txt | head -5 | cut -c1-200
G=$O/gemv.txt
for r in 1 2; do for b in flexkern flexkern_h; do
  echo "== $r [$b]" >> $G
  timeout 60 ./$b bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k --n 14336,4096 --k 4096 >> $G 2>&1
  timeout 60 ./$b bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k --n 4096 --k 14336 >> $G 2>&1
done; done
grep -E "^==|^q" $G | awk '/^==/{print; next} {printf "  %s %s %s %s %s\n", $1,$2,$3,$6,$NF}'
date -u +%FT%TZ
L=$O/runs.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
for f in q4_0 q4_k_m; do
  timeout 120 ./flexkern synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for r in 1 2; do for b in flexkern flexkern_h; do
    timeout 40 ./$b run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L; echo "$f rc=$? [$b] $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
  done; done
done
for r in 1 2; do for b in flexkern flexkern_h; do
  timeout 40 ./$b run --device cuda --model /tmp/s.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L; echo "smol rc=$? [$b] $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done
rm -f $O/out.txt
date -u +%FT%TZ
