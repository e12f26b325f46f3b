# SPDX-License-Identifier: Apache-2.0
"""Robustness: 10,000 mutants of the real topology files (fixed seed) each parse into a
consistent topology or raise TopoParseError. The loop runs in C++ (_C._fuzz_topology_texts)
to stay fast; a smaller Python-side sample checks the exception class users see."""

from __future__ import annotations

import os
import random

import pytest

import torch_topo
from torch_topo import TopoParseError

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
SEED = 1234


def _corpus() -> list[str]:
    texts = []
    for sub in ("nvidia_smi_topo", "nccl_topo_xml", "hwloc"):
        for name in sorted(os.listdir(os.path.join(DATA, sub))):
            with open(os.path.join(DATA, sub, name), encoding="utf-8", errors="surrogateescape") as f:
                texts.append(f.read())
    texts.append(torch_topo.load_topology(
        os.path.join(DATA, "nvidia_smi_topo", "ncclTests331_leonardo_4xA100-64GB_NV4mesh_4xNIC.txt")
    ).to_json())
    return texts


@pytest.mark.timeout(120)
def test_ten_thousand_mutants_parse_or_raise_parse_error():
    report = torch_topo._C._fuzz_topology_texts(_corpus(), SEED, 10_000)
    assert report["inputs"] == 10_000
    assert report["failures"] == [] and report["failure_count"] == 0
    # Both outcomes occur, so the mutations neither leave files intact nor destroy them all.
    assert report["parsed"] > 1000
    assert report["rejected"] > 1000


def _mutate(rng: random.Random, text: str) -> str:
    kind = rng.randrange(3)
    if kind == 0:
        return text[: rng.randrange(len(text) + 1)]
    if kind == 1:
        pos = rng.randrange(len(text) + 1)
        return text[:pos] + "".join(chr(rng.randrange(1, 0x110000) % 0xD7FF or 1) for _ in range(3)) + text[pos:]
    cells = text.split()
    if len(cells) > 1:
        i = rng.randrange(len(cells) - 1)
        cells[i] += cells.pop(i + 1)  # glue two cells
    return " ".join(cells)


@pytest.mark.timeout(60)
def test_python_sees_only_topo_parse_error():
    rng = random.Random(SEED)
    corpus = _corpus()
    outcomes = {"parsed": 0, "rejected": 0}
    for _ in range(500):
        text = _mutate(rng, rng.choice(corpus))
        try:
            torch_topo._C.load_topology_text(text, "mutant.txt")
            outcomes["parsed"] += 1
        except TopoParseError as exc:
            assert str(exc).startswith("mutant.txt:")
            assert exc.path == "mutant.txt" and exc.line >= 1 and exc.column >= 1
            outcomes["rejected"] += 1
    assert outcomes["parsed"] > 0 and outcomes["rejected"] > 0
