set -u
export LD_LIBRARY_PATH=$PWD/build/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 400 python3 tests/gpu/zoo.py --ebb build/utils/ebb --out /tmp/zoo --jobs hf_gpt2_eager,hf_mistral,resnet50 --modes limit:0.8:EBB_RECOMPUTE=1 --timeout 150 > $OUT/zoo.txt 2>&1
echo "zoo rc=$?"
tail -8 $OUT/zoo.txt
for f in /tmp/zoo/*.log; do echo "== $f"; grep -h "write sets\|recompute candidates\|replayed once\|rror" $f | cut -c1-330; done
cp /tmp/zoo/zoo.jsonl $OUT/zoo.jsonl 2>/dev/null
tar czf $OUT/logs.tgz /tmp/zoo/*.log 2>/dev/null
