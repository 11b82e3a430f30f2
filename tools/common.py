"""Shared bits of the benchmark tools: the facts every JSON record carries."""

from __future__ import annotations

import json
import sys

from gpurl.utils.provenance import environment_record, gpurl_commit  # noqa: F401


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)
    sys.stdout.flush()
