#!/usr/bin/env bash
# GPU call 1 of 2 (carry .whl .devdata .gguf): install the wheels, keep the GGUF's first part, check the
# CUDA path of every stage of the real recipe at its mini sizes on a tiny model, then the device's peak
# and the rollout bench at SmolLM2-135M shapes. Results: $OUT/call1.tgz and $OUT/call1.log.
set -u
source bench/device/common.sh
exec > >(tee "$OUT/call1.log") 2>&1
t0=$SECONDS
if [ -z "${SKIP_PIP:-}" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$S/site" .whl/*.whl || exit 1
fi
cp .gguf/part_a .gguf/sha256 "$S/" && mkdir -p "$S/data" && tar -xJf .devdata/data.tar.xz -C "$S/data" || exit 1
echo "setup $((SECONDS - t0)) s"
$PY - <<'PYEOF' > "$S/versions.txt" 2>&1
import platform, torch, transformers, trl, peft, datasets, gguf, bfcl_eval  # noqa
print("python", platform.python_version(), "torch", torch.__version__, "transformers", transformers.__version__,
      "trl", trl.__version__, "peft", peft.__version__, "datasets", datasets.__version__)
print("device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")
PYEOF
cat "$S/versions.txt"
$PY -c "from tooltune.models import build_tiny_model; build_tiny_model('$S/tiny', size='test', seed=0)" || exit 1
echo "== smoke: the mini real recipe on $DEVICE, two processes ($((SECONDS - t0)) s)"
rm -rf "$S/smoke"
timeout 90 $PY bench/device/real_recipe.py --config configs/quickstart_real_smollm2_mini.yaml --out "$S/smoke" \
  --set model="$S/tiny" --set clock=wall --set train.run.device=$DEVICE > "$S/smoke.log" 2>&1
echo "smoke exit $? ($((SECONDS - t0)) s)"; grep -E "^\[(main|train|eval)\]|Error|error:" "$S/smoke.log" | tail -25
echo "== peak ($((SECONDS - t0)) s)"
timeout 30 $PY bench/gpu.py --parts peak --out "$S/gpu" > "$S/gpu.log" 2>&1; echo "peak exit $?"; tail -3 "$S/gpu.log"
echo "== rollout ($((SECONDS - t0)) s)"
timeout ${ROLLOUT_S:-60} $PY bench/rollout.py --models smollm2 --cases grpo,episode --prompt-lens 1024 2048 --ns 8 16 \
  --clock wall --repeats 2 --out "$S/rollout.json" > "$S/rollout.log" 2>&1; echo "rollout exit $?"
grep -v "^\s*$" "$S/rollout.log" | tail -12
tar -czf "$OUT/call1.tgz" -C "$S" versions.txt smoke.log gpu.log gpu rollout.log $(cd "$S" && ls rollout.json 2>/dev/null)
echo "call1 done in $((SECONDS - t0)) s"
