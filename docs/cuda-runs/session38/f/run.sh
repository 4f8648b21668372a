#!/bin/bash
# Session 38 call f: HEAD 91ec9fe's build (s38f): compute-sanitizer memcheck on verify --quick,
# bench gemv beside cuBLAS f16 (the issue's peer) in the same call, and 8B decode per format.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/f; mkdir -p $O
B=../../../../.devcarry/s38f/flexkern
$B bench gemv --device cuda --graph --reps 20 --n 14336,4096 --k 4096 --formats f16,q8_0,q4_0,q4_k,q6_k > $O/bench.txt 2>&1
timeout 60 python3 ../../../../bench/gemv_peers_cuda.py --graph > $O/peers.txt 2>&1
for f in q4_0 q8_0 q4_k_m q6_k; do
  $B synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/m_$f.gguf > /dev/null 2>&1
  $B run --device cuda --model /tmp/m_$f.gguf --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$f $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1 | sed 's/.*decode/decode/')" >> $O/decode.txt
  rm -f /tmp/m_$f.gguf
done
timeout 200 compute-sanitizer --tool memcheck $B verify --device cuda --quick > $O/memcheck.txt 2>&1; echo "memcheck rc $?" >> $O/memcheck.txt
cat $O/decode.txt
grep -a "^copy\|^f16\|^q" $O/bench.txt | tr -s ' ' | cut -d' ' -f1-6,8
grep -a -i "graph\|mv\|linear" $O/peers.txt | head -12
grep -a "verify:\|ERROR SUMMARY\|rc " $O/memcheck.txt
