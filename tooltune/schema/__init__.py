"""The one schema every stage shares: ToolSpec, ToolCall, Sample, Parsed (`types`), the scoring mode
`Scoring` (`scoring`), the reader of data records as hostile input (`records`), and the rows handed to
training engines: their column names, encoding and check (`rows`, imported as `tooltune.schema.rows`).

Data flows one way: raw record -> Sample -> prompt -> completion -> Parsed -> reward or verdict.
Every adapter produces `Sample`; every consumer reads it. All types round-trip losslessly through
plain JSON (`to_dict` / `from_dict`), so JSONL files, HF datasets columns and verl parquet rows
carry exactly the same information.
"""

from tooltune.schema.records import (
    MAX_RECORD_DEPTH,
    RecordValueError,
    SchemaError,
    compressed_format,
    decode_line,
    dumps_record,
    find_fault,
    loads_record,
    raw_decode_record,
)
from tooltune.schema.scoring import Scoring
from tooltune.schema.types import (
    CATEGORIES,
    ROLES,
    Parsed,
    Sample,
    ToolCall,
    ToolSpec,
    calls_from_any,
    dumps_line,
    iter_jsonl,
    read_jsonl,
    write_jsonl,
)

__all__ = [
    "CATEGORIES",
    "MAX_RECORD_DEPTH",
    "ROLES",
    "Parsed",
    "RecordValueError",
    "Sample",
    "SchemaError",
    "Scoring",
    "ToolCall",
    "ToolSpec",
    "calls_from_any",
    "compressed_format",
    "decode_line",
    "dumps_line",
    "dumps_record",
    "find_fault",
    "iter_jsonl",
    "loads_record",
    "raw_decode_record",
    "read_jsonl",
    "write_jsonl",
]
