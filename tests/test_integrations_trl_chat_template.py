"""The chat template a TRL `environment_factory` run needs (`tooltune.integrations.trl.chat_template`):
the failure TRL would stop with, said first with the line that fixes it, and that line working."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooltune.config import ConfigError
from tooltune.integrations.trl import check_chat_template, parsed_templates, trl_chat_template
from tooltune.integrations.trl.chat_template import TRL_FAILURE, chat_template_problem

pytest.importorskip("trl")


def test_a_template_trl_cannot_read_is_refused_with_the_line_that_fixes_it(tiny_model_dir: Path):
    from transformers import AutoTokenizer  # deferred: heavy
    from trl.chat_template_utils import add_response_schema  # deferred: heavy

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)  # tooltune's own chat template: TRL knows it not
    with pytest.raises(ValueError, match=TRL_FAILURE):
        add_response_schema(tok)  # what TRL's GRPOTrainer does with it
    with pytest.raises(ConfigError, match=r'tokenizer.chat_template = tooltune.integrations.trl.'
                                          r'trl_chat_template\("qwen2_5"\)'):
        check_chat_template(tok)
    tok.chat_template = trl_chat_template("qwen2_5")  # the one line
    assert chat_template_problem(tok) is None
    assert add_response_schema(tok).response_template is not None  # and TRL reads its tool calls


def test_only_stock_templates_trl_maps_are_offered():
    names = parsed_templates()
    assert {"qwen2_5", "qwen3", "llama3_2"} <= set(names)
    assert not any(n.endswith("_training") for n in names)  # TRL maps no training variant
    with pytest.raises(ConfigError, match="TRL bundles no chat template 'qwen9'; it reads tool calls of: "):
        trl_chat_template("qwen9")
