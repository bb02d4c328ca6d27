#!/usr/bin/env bash
# GPU call 2 of 2 (carry .gguf_b), while the machine is still warm from call 1: join the GGUF, convert it,
# run the real-model recipe (configs/quickstart_real_smollm2.yaml, sizes unchanged) on the GPU with its
# evaluations beside the training (bench/device/real_recipe.py) for at most RECIPE_S seconds, and pack the
# run folder without weights: $OUT/real_gpu.tgz and $OUT/call2.log.
set -u
source bench/device/common.sh
exec > >(tee "$OUT/call2.log") 2>&1
t0=$SECONDS
cat "$S/part_a" .gguf_b/part_b > "$S/smollm2.gguf"
echo "$(cat "$S/sha256")  $S/smollm2.gguf" | sha256sum -c - || exit 1
rm -rf "$S/smollm2"
$PY -m tooltune.cli models from-gguf "$S/smollm2.gguf" --out "$S/smollm2" --dtype float32 || exit 1
echo "model folder in $((SECONDS - t0)) s"
RECIPE=(bench/device/real_recipe.py --config configs/quickstart_real_smollm2.yaml --out "$S/real"
  --set model="$S/smollm2" --set clock=wall --set threads=4 --set train.run.device="$DEVICE"
  --set benchmarks.batch_size=128 --set train.diagnostics.eval_batch_size=16 ${EXTRA:-})
timeout "${RECIPE_S:-480}" $PY "${RECIPE[@]}" > "$S/real.log" 2>&1
echo "recipe exit $? ($((SECONDS - t0)) s)"
grep -E "^\[(main|train|eval)\]|Error|error:" "$S/real.log" | grep -v "it/s\]" | tail -40
pkill -f bench/device/real_recipe.py; sleep 1
$PY "${RECIPE[@]}" --role report >> "$S/real.log" 2>&1
cp "$S/real.log" "$S/real/recipe.log"
tar -czf "$OUT/real_gpu.tgz" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.bin' --exclude='*.pth' \
  --exclude='checkpoint-*' -C "$S" real
ls -la "$OUT"; echo "call2 done in $((SECONDS - t0)) s"
