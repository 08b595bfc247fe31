"""The workflow's JSON arguments to a stage: inline when short, else a file named by its digest."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

# Linux refuses a command with one argument over 128 KiB (MAX_ARG_STRLEN), whatever the total:
# a value that grows with the apps (their sources at a thousand apps) goes in a file beyond this.
ARGUMENT_INLINE_MAX = 32_000
ARGUMENTS_DIR = os.path.join(".snakemake", "roofline-arguments")


def json_argument(text: str, folder: str = ARGUMENTS_DIR) -> str:
    """A rule's JSON value as a command-line argument: the text itself when short, else ``@PATH``
    of a file holding it (named by its digest, so a changed value is a changed argument and reruns
    the rule, as the text would). Read back with :func:`read_json_argument`."""
    if len(text.encode("utf-8")) <= ARGUMENT_INLINE_MAX:
        return text
    path = Path(folder) / f"{hashlib.sha256(text.encode('utf-8')).hexdigest()[:24]}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    return f"@{path}"


def read_json_argument(value: str) -> object:
    """The JSON value of an argument that :func:`json_argument` wrote: inline, or ``@PATH``."""
    if value.startswith("@"):
        try:
            value = Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"the argument file {value[1:]} cannot be read ({exc.strerror}); rerun the "
                             "workflow, which writes it") from exc
    return json.loads(value)
