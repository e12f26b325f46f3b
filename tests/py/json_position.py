# SPDX-License-Identifier: Apache-2.0
"""Where a value of a JSON document starts in the text json.dumps writes, found apart from the
readers under test: a marker written in the value's place changes no byte before it."""

from __future__ import annotations

import copy
import json
import re


def field_keys(field: str) -> list:
    """The keys of a field path as the readers name it: "gpus[1].index" -> ["gpus", 1, "index"]."""
    return [int(index) if index else name
            for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", field)]


def position(doc, field: str, **dumps) -> str:
    """"line:col" (1-based, one column per byte) where `field` of `doc` starts in
    json.dumps(doc, **dumps)."""
    marked = copy.deepcopy(doc)
    keys = field_keys(field)
    target = marked
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = "@here@"
    text = json.dumps(marked, **dumps).encode()
    offset = text.index(b'"@here@"')
    line = text.count(b"\n", 0, offset) + 1
    column = offset - (text.rfind(b"\n", 0, offset) + 1) + 1
    return f"{line}:{column}"
