"""For an offline GPU machine that has bfcl-eval's wheel but not its ~40 client-library dependencies.

bfcl-eval's AST checker imports `bfcl_eval.constants.model_config` only to read one flag of the model key it
is given (`underscore_to_dot`); that module imports every provider's client (anthropic, boto3, cohere,
openai, ...), which cannot travel to a machine without a network. With this folder on PYTHONPATH, that one
module is a table of the configs tooltune's scorer uses, written from the real module by
`bench/device/prepare.sh` (bfcl_model_config.json). The checker itself, its data and every rule are
bfcl-eval's own. Never used where bfcl-eval installs normally (`pip install bfcl-eval`).
"""

import json
import sys
import types
from pathlib import Path

_TABLE_FILE = Path(__file__).resolve().parents[1] / "bfcl_model_config.json"
_table = json.loads(_TABLE_FILE.read_text(encoding="utf-8"))
_module = types.ModuleType("bfcl_eval.constants.model_config")
_module.MODEL_CONFIG_MAPPING = {key: types.SimpleNamespace(**fields) for key, fields in _table.items()}
sys.modules.setdefault(_module.__name__, _module)
