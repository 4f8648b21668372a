#!/bin/bash
# Session 39 call c: the second bulk stage of plain launches asked for after the activations'
# loads (s39c plans FK_SLATE 1 there; FLEXKERN_GEMV_LATE=0 is HEAD's plan), against deeper
# rings with late stages, and per launch kind in the 8B step (scoped knobs): gate/up on three
# stages (one late), Q, K, V and wo on a bulk ring of the warp's share with all but one stage late.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/c; mkdir -p $O
B=../../../../.devcarry/s39c/flexkern
bench() { # tag env...
  local t=$1; shift
  echo "== $t" >> $O/bench.txt
  env "$@" $B bench gemv --device cuda --graph --reps 20 --n 14336,49152 --k 4096 --formats q4_0,q4_k >> $O/bench.txt 2>&1
  env "$@" $B bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q4_0,q4_k >> $O/bench.txt 2>&1
}
for r in 1 2; do bench "planned r$r" X=1; bench "late0 r$r" FLEXKERN_GEMV_LATE=0; done
bench "bulk3 late2" FLEXKERN_GEMV_BULK=3 FLEXKERN_GEMV_LATE=2
bench "bulk3 late1" FLEXKERN_GEMV_BULK=3 FLEXKERN_GEMV_LATE=1
for f in q4_0 q4_k_m; do
  $B synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/m_$f.gguf > /dev/null 2>&1
done
dec() { # tag model env...
  local t=$1 m=$2; shift 2
  env "$@" $B run --device cuda --model $m --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$t $(basename $m) $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1 | sed 's/.*decode/decode/')" >> $O/decode.txt
}
GU="FLEXKERN_GEMV_BULK=gateup:3 FLEXKERN_GEMV_LATE=gateup:1"
ST="FLEXKERN_GEMV_BULK=stack:3 FLEXKERN_GEMV_LATE=stack:2"
WO="FLEXKERN_GEMV_BULK=4096x4096:2 FLEXKERN_GEMV_LATE=4096x4096:1"
DN="FLEXKERN_GEMV_LATE=4096x14336:1"
for r in 1 2; do
  for m in /tmp/m_q4_0.gguf /tmp/m_q4_k_m.gguf; do
    dec "planned r$r" $m X=1; dec "late0 r$r" $m FLEXKERN_GEMV_LATE=0
    dec "gu r$r" $m $GU; dec "stack r$r" $m $ST; dec "wo r$r" $m $WO; dec "down r$r" $m $DN
  done
done
for t in planned gu stack wo; do
  case $t in gu) E=$GU;; stack) E=$ST;; wo) E=$WO;; *) E=X=1;; esac
  env $E FLEXKERN_CUDA_TRACE=step $B run --device cuda --model /tmp/m_q4_0.gguf --prompt "The three laws of robotics are" -n 40 --temperature 0 --ctx 160 2>&1 | grep -a "fk_gemv\|replay 32" | sed 's/.*replay 32/replay 32/' | sed "s/^/$t /" >> $O/trace.txt
done
cat $O/decode.txt
cut -c1-200 $O/trace.txt
grep -a "^== \|^q" $O/bench.txt | tr -s ' ' | cut -d' ' -f1-6,8 | head -120
