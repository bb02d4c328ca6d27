"""Run folders: one writer at a time, results of one run only, append-only files that survive a kill.

A command that writes results into a folder (an evaluation, a training run, the quickstart) uses three
things from here; each is independent of what the results are.

**One writer.** `with RunLock(folder):` takes an exclusive advisory lock (`fcntl.flock` on
`folder/.lock`, non-blocking) and writes the holder's pid, host, command and start time into that
file. A second process asking for the same folder gets `RunFolderBusy`, whose message names the
folder and the holder. The lock is released when the block ends, and by the operating system when
the process dies (killed included), so a killed run can be resumed at once; the `.lock` file itself
stays (removing it would let two processes lock two different files) and is emptied on a clean exit.
A nested `RunLock` on a folder the same thread already holds is a no-op, so a command may hold the
folder around a library call that locks it too; another thread of the same process gets
`RunFolderBusy`. A process forked while holding the lock shares it until the child exits too.

**One run per folder.** The caller describes what defines its results as `fields`: a flat dict of
JSON values (the command, the benchmark, the template, the sampling settings, sha256 of the inputs,
the versions of the packages that compute scores; the caller chooses). Before writing anything:

    with RunLock(out):
        resuming = check_identity(out, fields, resume)   # RunMismatch when the folder is not ours
        if not resuming:
            write_identity(out, fields)                   # out/run.json
            ...start fresh...
        else:
            ...keep the finished results, append the rest...

`check_identity` returns False for a missing or empty folder (nothing to resume; a folder holding
only dot-files and `run.json` counts as empty), True when the folder holds this same run and
`resume` is set. It raises `RunMismatch` when the folder holds another run (the message names
every differing field, nested keys dotted, with the folder's value and this run's), when it holds
this run but `resume` is not set (so that finished results are never wiped by a forgotten flag), and
when it holds files but no readable `run.json` (its owner cannot be checked). With `subset=True` only
the given fields are compared: a command checks the folder with what it knows at once (the command,
the benchmark) before slower work, and the whole identity later.

**Inputs by content.** A run's input files (data, a model folder) are part of its identity by their
content: `content_digest(path)` is a sha256 over a file's bytes, or over a folder's files and their
relative names; `check_inputs(folder, inputs)` refuses, naming each input and its file, a resume
whose inputs differ from those `run.json` recorded under ``"inputs"``. A file larger than
`FULL_DIGEST_BYTES` is digested from its size and `DIGEST_SAMPLES` evenly spaced 1 MiB pieces (the
digest then starts with ``sampled-``): a replaced model or data file changes it, at a bounded cost.

**What a failed command created.** `removed_on_failure(folder)` wraps a command that creates its output
folder: when the block raises and the folder did not exist before, the folder (and the parent folders
the command created) is removed unless it holds results (a non-empty file other than `run.json` and
`manifest.json`, or a folder), which a resume can continue. A folder that existed before is never
touched.

**Append-only JSONL.** `drop_torn_tail(path)` makes a JSONL file end at a complete line before more
lines are appended: a last line cut by a kill (no trailing newline, or not JSON) is removed, so the
next record never glues onto it; a complete JSON last line that only lacks its newline gets one.

Only the standard library is used.
"""

from tooltune.rundir.files import drop_torn_tail, removed_on_failure
from tooltune.rundir.identity import (
    DIGEST_SAMPLES,
    FULL_DIGEST_BYTES,
    IDENTITY_NAME,
    RunMismatch,
    check_identity,
    check_inputs,
    content_digest,
    differences,
    read_identity,
    write_identity,
)
from tooltune.rundir.lock import LOCK_NAME, RunFolderBusy, RunLock

__all__ = ["DIGEST_SAMPLES", "FULL_DIGEST_BYTES", "IDENTITY_NAME", "LOCK_NAME", "RunFolderBusy", "RunLock",
           "RunMismatch", "check_identity", "check_inputs", "content_digest", "differences", "drop_torn_tail",
           "read_identity", "removed_on_failure", "write_identity"]
