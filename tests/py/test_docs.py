# SPDX-License-Identifier: Apache-2.0
"""The README and docs/ against the code: the statements a test can hold them to."""

from __future__ import annotations

import pathlib
import re

import pytest
from benchmark_scripts import load_benchmark

from torch_topo.cli import main
from torch_topo.config import ENV_VARS, OTHER_VARS, TopoConfig

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _readme_config_table() -> dict[str, str]:
    """field -> variable, from the rows of the README's Configuration table."""
    section = ROOT.joinpath("README.md").read_text().split("## Configuration", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(TORCH_TOPO_[A-Z_]+)` \| `([a-z_]+)` \|", section, re.MULTILINE)
    return {field: var for var, field in rows}


def test_readme_config_table_lists_every_variable_of_the_config():
    assert _readme_config_table() == ENV_VARS


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_variable_the_docs_name_is_one_the_config_accepts(doc):
    # CMake options (-DTORCH_TOPO_...) are not environment variables.
    named = set(re.findall(r"(?<!-D)\b(TORCH_TOPO_[A-Z_]+)", doc.read_text()))
    for var in sorted(named):
        TopoConfig.from_env({var: ""})  # raises ValueError naming an unknown variable



def test_every_variable_the_sources_name_is_accepted_and_in_the_readme():
    # The package, the build and the scripts; tests name made-up variables on purpose.
    sources = [ROOT / "setup.py", ROOT / ".ci" / "run", *ROOT.glob("torch_topo/**/*.py"),
               *ROOT.glob("scripts/*.sh"), *ROOT.glob("benchmarks/*.py"),
               *ROOT.glob("examples/*.py")]
    named = set()
    for path in sources:
        if path.is_file():
            named |= set(re.findall(r"(?<!-D)\b(TORCH_TOPO_[A-Z_]+)", path.read_text()))
    named.discard("TORCH_TOPO_WITH_CUDA")  # a C macro setup.py defines, not a variable
    readme = ROOT.joinpath("README.md").read_text()
    known = set(ENV_VARS.values()) | set(OTHER_VARS)
    assert sorted(named - known) == []
    assert sorted(v for v in known if f"`{v}" not in readme) == []

def test_emulated_collectives_takes_sizes_with_units_as_docs_emulator_md_runs_it():
    module = load_benchmark("emulated_collectives")
    args = module.build_parser().parse_args(["--min-bytes", "1M", "--max-bytes", "64M"])
    assert (args.min_bytes, args.max_bytes) == (1 << 20, 64 << 20)
    with pytest.raises(SystemExit):
        module.build_parser().parse_args(["--min-bytes", "1X"])


def test_ops_md_split_listing_is_what_plan_attention_prints(capsys):
    # docs/ops.md shows the split listing of one command; the cost model has moved under it
    # before without the page following.
    text = ROOT.joinpath("docs", "ops.md").read_text()
    shown = re.search(r"it prints:\n\n```\n(.*?)```", text, re.DOTALL).group(1)
    dgx1 = ROOT / "tests" / "data" / "nvidia_smi_topo" / \
        "dgx1like_8xV100-SXM2_hybridcube_1xEDR_oneflow.txt"
    assert main(["plan", str(dgx1), "--hosts", "2", "--mesh", "sp=16", "--attention",
                 "heads=8,kv_heads=2,head_dim=128,seq_len=8192,dtype=bf16"]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if "Ulysses" in line]
    assert shown.splitlines() == printed
