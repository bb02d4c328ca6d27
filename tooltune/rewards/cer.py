"""R2IF Chain-of-thought Effectiveness Reward (CER) and the ACE metric.

    R_cer(R | Q, T) = v(R | Q, T) − v_base(Q, T)                                     range [−1, 1]
    v(R | Q, T)     = (1/K) Σ_k 1[calls of continuation k are correct]
    ACE             = mean of R_cer over an evaluation set

A *student* model continues K times (default K = 5, temperature 0.4) from the prefix
`<reason>R</reason><tool>` (the template's reasoning block closed, call block opened) given the same
prompt (query Q and tools T); v is the share of continuations whose calls equal the ground truth.
v_base is the student's own success rate on the sample (by default it writes its whole answer,
reasoning included: `base_mode="free"`; `base_mode="no_reasoning"` continues from an empty reasoning
block instead), computed once per (sample id, student name) and cached on disk (SQLite, safe to
resume: every batch is committed). Continuations are judged on correctness only (the last call
block, whatever surrounds it), since the student only has to finish a call block.

When the policy's reasoning cannot be read (format error), v = 0: reasoning that cannot be
extracted helps nobody, and this keeps a malformed answer from dodging a negative R_cer.

The student is any generation backend (`tooltune.generation`: a local Hugging Face model or
an OpenAI-compatible endpoint such as a vLLM server), given as a Backend, a `BackendConfig` or a
mapping of its fields (`{"model": "models/r2if-student"}`, `{"endpoint": URL, "model_name": NAME}`); a
config is built into a backend on first use and again after unpickling, so the reward pickles
without the model. All continuations and missing baselines of a
training batch go to the student in one `generate` call; rollouts of one prompt whose reasoning is
word for word the same share one set of K continuations (v depends on nothing else). Needs the
`prompt` column (chat messages) and, for caching, `sample_id` (without it the prompt's hash is the key).
Under a template whose tools go to the chat template (``native``) the rows' ``chat_tools`` column
(`tooltune.schema.rows.row_tools`) goes with the prompt to the student.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from tooltune.generation import BackendConfig, GenerationRequest, backend_config, make_backend
from tooltune.parsing import get_grammar
from tooltune.rewards.base import LENIENT, ParseCache, Reward, completion_text, gold_calls, row_columns
from tooltune.rewards.binary import calls_correct
from tooltune.schema import ToolCall
from tooltune.schema.rows import CHAT_TOOLS, PROMPT, SAMPLE_ID, row_tools

logger = logging.getLogger(__name__)


class VBaseCache:
    """v_base per (sample id, student name) in SQLite (or in memory when `path` is None)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = str(path) if path else None
        self._mem: dict[tuple[str, str], float] = {}
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "_mem": dict(self._mem)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])
        self._mem.update(state["_mem"])

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, check_same_thread=False)
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS v_base (sample_id TEXT, student TEXT, k INTEGER, "
                "successes INTEGER, PRIMARY KEY (sample_id, student))"
            )
        return self._conn

    def get(self, sample_id: str, student: str) -> float | None:
        key = (sample_id, student)
        if key in self._mem or self.path is None:
            return self._mem.get(key)
        with self._lock:
            row = (
                self._db()
                .execute("SELECT k, successes FROM v_base WHERE sample_id=? AND student=?", key)
                .fetchone()
            )
        if row is None:
            return None
        self._mem[key] = row[1] / row[0]
        return self._mem[key]

    def put_many(self, rows: Sequence[tuple[str, str, int, int]]) -> None:
        """rows: (sample_id, student, k, successes); committed at once."""
        for sid, student, k, succ in rows:
            self._mem[(sid, student)] = succ / k
        if self.path is not None and rows:
            with self._lock:
                db = self._db()
                db.executemany("INSERT OR REPLACE INTO v_base VALUES (?, ?, ?, ?)", rows)
                db.commit()


def sample_key(sample_id: Any, prompt: Any) -> str:
    if isinstance(sample_id, str) and sample_id:
        return sample_id
    blob = json.dumps(prompt, sort_keys=True, ensure_ascii=False, default=str)
    return "prompt-sha1:" + hashlib.sha1(blob.encode("utf-8")).hexdigest()


class CERReward(Reward):
    """R_cer in [−1, 1] (see module docstring)."""

    name = "cer"
    lo, hi = -1.0, 1.0

    def __init__(
        self,
        student: Any = None,
        template: str = "r2if",
        format_mode: str = "strict",
        k: int = 5,
        temperature: float = 0.4,
        max_new_tokens: int = 256,
        cache_path: str | None = None,
        base_mode: str = "free",
        seed: int | None = None,
    ) -> None:
        super().__init__(template, format_mode)
        if student is None:
            raise ValueError(
                "CERReward needs a student: a generation backend, a BackendConfig or a mapping of its "
                "fields such as {'model': 'models/r2if-student'} (see tooltune.generation.BackendConfig)"
            )
        if get_grammar(self.grammar).continuation is None:
            raise ValueError(
                f"CERReward.template: reasoning continuation needs a grammar with a reasoning block "
                f"(tool_n1, r2if), got {template!r}"
            )
        if base_mode not in ("free", "no_reasoning"):
            raise ValueError(f"CERReward.base_mode: expected 'free' or 'no_reasoning', got {base_mode!r}")
        if k < 1:
            raise ValueError(f"CERReward.k must be >= 1, got {k}")
        # A make_backend spec {"kind": ..., **constructor arguments} is also accepted as a mapping.
        self.student_spec = dict(student) if isinstance(student, Mapping) and "kind" in student else None
        self.student_config: BackendConfig | None = None
        if isinstance(student, (BackendConfig, Mapping)) and self.student_spec is None:
            self.student_config = backend_config(student)  # checked now: a bad key fails before training
        lazy = self.student_spec is not None or self.student_config is not None
        self._student = None if lazy else student
        self.k, self.temperature, self.max_new_tokens = int(k), float(temperature), int(max_new_tokens)
        self.base_mode, self.seed = base_mode, seed
        self.cache = VBaseCache(cache_path)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self.student_spec is not None or self.student_config is not None:
            state["_student"] = None  # rebuilt where unpickled (e.g. in another process)
        return state

    @property
    def student(self) -> Any:
        if self._student is None:
            if self.student_config is not None:
                self._student = self.student_config.build()
            else:
                spec = dict(self.student_spec or {})
                self._student = make_backend(spec.pop("kind"), **spec)
        return self._student

    @property
    def student_name(self) -> str:
        return str(getattr(self.student, "name", type(self.student).__name__))

    def prefix(self, reasoning: str) -> str:
        return get_grammar(self.grammar).continuation_prefix(reasoning)

    def _request(
        self, prompt: Any, prefix: str, key: str, kind: str, tools: list[dict] | None = None
    ) -> GenerationRequest:
        return GenerationRequest(
            messages=list(prompt),
            n=self.k,
            temperature=self.temperature,
            max_new_tokens=self.max_new_tokens,
            prefix=prefix,
            seed=self.seed,
            id=key,
            meta={"cer": kind},
            tools=tools,
        )

    def _successes(self, prefix: str, texts: Sequence[str], gold: list[ToolCall]) -> int:
        return sum(
            calls_correct(ParseCache(prefix + completion_text(t)).get(self.grammar, LENIENT), gold)
            for t in list(texts)[: self.k]
        )

    def score(self, ctx: ParseCache, gold: list[ToolCall], **columns: Any) -> float:
        return self.batch_ctx([ctx], [gold], **{k: [v] for k, v in columns.items()})[0]

    def batch_ctx(
        self, ctxs: Sequence[ParseCache], answers: Sequence[Any], **columns: Sequence[Any]
    ) -> list[float]:
        rows: list[dict[str, Any] | None] = []
        for i, (ctx, answer) in enumerate(zip(ctxs, answers)):
            cols = row_columns(columns, i)
            prompt = cols.get(PROMPT) or cols.get("prompts")
            try:
                gold = gold_calls(answer)
            except Exception as e:
                logger.warning("reward cer: bad answer (%.200s); scoring 0", e)
                rows.append(None)
                continue
            if not isinstance(prompt, list):
                logger.warning("reward cer: row %d has no chat-message 'prompt' column; scoring 0", i)
                rows.append(None)
                continue
            parsed = self.parsed(ctx)
            rows.append(
                {
                    "prompt": prompt,
                    "gold": gold,
                    "key": sample_key(cols.get(SAMPLE_ID), prompt),
                    "tools": row_tools(cols),
                    "reasoning": parsed.reasoning if parsed.format_ok and parsed.reasoning else None,
                }
            )
        student = self.student_name
        base_prefix = "" if self.base_mode == "free" else self.prefix("")
        requests, jobs = [], []  # jobs: ("base", sample key, row) | ("cont", (sample key, reasoning), row)
        seen: set[Any] = set()
        for row in rows:
            if row is None:
                continue
            if row["key"] not in seen and self.cache.get(row["key"], student) is None:
                seen.add(row["key"])
                requests.append(self._request(row["prompt"], base_prefix, row["key"], "base", row["tools"]))
                jobs.append(("base", row["key"], row))
            cont = (row["key"], row["reasoning"])
            # Rollouts of one prompt often share their reasoning word for word: v(R | Q, T) depends on
            # nothing else, so one set of K continuations serves them all.
            if row["reasoning"] is not None and cont not in seen:
                seen.add(cont)
                requests.append(self._request(
                    row["prompt"], self.prefix(row["reasoning"]), row["key"], "continuation", row["tools"]
                ))
                jobs.append(("cont", cont, row))
        outputs = self.student.generate(requests) if requests else []
        v: dict[Any, float] = {}
        new_base = []
        for (kind, ref, row), texts in zip(jobs, outputs):
            if kind == "base":
                new_base.append((ref, student, self.k, self._successes(base_prefix, texts, row["gold"])))
            else:
                v[ref] = self._successes(self.prefix(row["reasoning"]), texts, row["gold"]) / self.k
        self.cache.put_many(new_base)
        return [
            0.0
            if row is None
            else v.get((row["key"], row["reasoning"]), 0.0) - (self.cache.get(row["key"], student) or 0.0)
            for row in rows
        ]

    def precompute_base(
        self, prompts: Sequence[Any], answers: Sequence[Any], sample_ids: Sequence[str], batch_size: int = 64,
        tools: Sequence[Any] | None = None,
    ) -> int:
        """Fill the v_base cache before training (batched, resumable); returns how many were computed.
        `tools`: each prompt's chat-template tools (``native``; a list or its JSON), None for none."""
        student = self.student_name
        base_prefix = "" if self.base_mode == "free" else self.prefix("")
        todo = {}
        tools = list(tools) if tools is not None else [None] * len(prompts)
        for p, a, s, t in zip(prompts, answers, sample_ids, tools):
            key = sample_key(s, p)
            if key not in todo and self.cache.get(key, student) is None:
                todo[key] = (p, gold_calls(a), row_tools({CHAT_TOOLS: t}))
        items = list(todo.items())
        for start in tqdm(range(0, len(items), batch_size), desc=f"v_base ({student})", disable=not items):
            chunk = items[start : start + batch_size]
            outputs = self.student.generate(
                [self._request(p, base_prefix, key, "base", t) for key, (p, _, t) in chunk]
            )
            self.cache.put_many(
                [
                    (key, student, self.k, self._successes(base_prefix, texts, gold))
                    for (key, (_, gold, _)), texts in zip(chunk, outputs)
                ]
            )
        return len(items)


def average_cot_effectiveness(
    cer: CERReward,
    completions: Sequence[Any],
    answers: Sequence[Any],
    prompts: Sequence[Any],
    sample_ids: Sequence[str] | None = None,
    batch_size: int = 64,
) -> dict[str, float]:
    """ACE = mean R_cer over an evaluation set (R2IF); also reports its standard error and n."""
    values: list[float] = []
    ids = list(sample_ids) if sample_ids is not None else [None] * len(completions)
    for start in range(0, len(completions), batch_size):
        sl = slice(start, start + batch_size)
        values += cer.batch(
            list(completions[sl]), list(answers[sl]), prompt=list(prompts[sl]), sample_id=ids[sl]
        )
    n = len(values)
    if not n:
        return {"ace": 0.0, "stderr": 0.0, "n": 0}
    mean = sum(values) / n
    var = sum((x - mean) ** 2 for x in values) / (n - 1) if n > 1 else 0.0
    return {"ace": mean, "stderr": (var / n) ** 0.5, "n": n}
