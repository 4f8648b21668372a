#!/bin/bash
# Session 39 call d: Q6_K on the bulk ring (a side entry a block; s39d plans it for single
# matrices of 24 MiB or more at k < 8192, its second stage late), verified, A/B against the
# register batches by a scoped knob; the closing figures (bench gemv beside cuBLAS, 8B decode
# per format) and compute-sanitizer memcheck on verify --quick.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/d; mkdir -p $O
B=../../../../.devcarry/s39d/flexkern
$B verify --device cuda > $O/verify.txt 2>&1; echo "verify rc $?" >> $O/verify.txt
ab() { # tag env...
  local t=$1; shift
  echo "== $t" >> $O/ab.txt
  env "$@" $B bench gemv --device cuda --graph --reps 20 --n 14336,49152 --k 4096 --formats q6_k >> $O/ab.txt 2>&1
  env "$@" $B bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q6_k >> $O/ab.txt 2>&1
}
REG="FLEXKERN_GEMV_BULK=14336x4096:0,49152x4096:0"
for r in 1 2; do ab "planned r$r" X=1; ab "reg r$r" $REG; done
ab "down3" FLEXKERN_GEMV_BULK=4096x14336:3
ab "down3 late1" FLEXKERN_GEMV_BULK=4096x14336:3 FLEXKERN_GEMV_LATE=4096x14336:1
$B bench gemv --device cuda --graph --reps 20 --n 14336,4096 --k 4096 --formats f16,q8_0,q4_0,q4_k,q6_k > $O/bench.txt 2>&1
timeout 60 python3 ../../../../bench/gemv_peers_cuda.py --graph > $O/peers.txt 2>&1
dec() { # tag model env...
  local t=$1 m=$2; shift 2
  env "$@" $B run --device cuda --model $m --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$t $(basename $m) $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1 | sed 's/.*decode/decode/')" >> $O/decode.txt
}
for f in q4_0 q8_0 q4_k_m q6_k; do
  $B synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/m_$f.gguf > /dev/null 2>&1
  dec planned /tmp/m_$f.gguf X=1
  [ $f = q6_k ] && { dec reg /tmp/m_$f.gguf $REG; dec down3 /tmp/m_$f.gguf FLEXKERN_GEMV_BULK=4096x14336:3; dec planned /tmp/m_$f.gguf X=1; }
  rm -f /tmp/m_$f.gguf
done
timeout 200 compute-sanitizer --tool memcheck $B verify --device cuda --quick > $O/memcheck.txt 2>&1; echo "memcheck rc $?" >> $O/memcheck.txt
tail -3 $O/verify.txt
grep -a "^== \|^q" $O/ab.txt | tr -s ' ' | cut -d' ' -f1-6,8
grep -a "^copy\|^f16\|^q" $O/bench.txt | tr -s ' ' | cut -d' ' -f1-6,8
grep -a -i "graph\|mv\|linear" $O/peers.txt | head -12
cat $O/decode.txt
grep -a "verify:\|ERROR SUMMARY\|rc " $O/memcheck.txt
