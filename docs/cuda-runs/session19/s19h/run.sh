#!/bin/bash
# Session 19 call h (H100): the streamed GEMV prefetching its warp's next rows into L2 before
# its wait (FLEXKERN_GEMV_L2PF=rows), 0 / 1 / 2 / 4 alternating, 8B Q4_0 and Q4_K_M decode
# through the graph.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s19h; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
for m in llama3-8b:q4_0 llama3-8b:q4_k_m; do
  sh=${m%%:*}; fm=${m##*:}; L=$O/$sh-$fm.txt
  timeout 90 ./flexkern synth-model --shape $sh --format $fm --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > /dev/null 2>&1; echo "synth $m rc=$?"
  for r in 1 2; do for pf in 0 1 2 4; do
    FLEXKERN_GEMV_L2PF=$pf timeout 40 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > /tmp/t$pf.txt 2>> $L; echo "$m pf=$pf rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < /tmp/t$pf.txt | cut -c1-8)"
  done; done
  rm -f /tmp/m.gguf
done
date -u +%FT%TZ
