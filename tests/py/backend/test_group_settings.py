# SPDX-License-Identifier: Apache-2.0
"""Ranks whose TopoConfig settings that shape collectives differ (an environment variable set on
one node's launcher only) fail at group creation, every rank with the same error naming the
setting and both values. Before, they went on to run different collectives and failed only at
the timeout with Gloo's or the store's message (or, over NCCL, could pair unrelated ops)."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from rank_processes import start_processes

WORLD = 3


def _main(rank, store_path, out_dir, env_by_rank, options_by_rank, defaults_by_rank):
    import torch_topo  # noqa: F401  (registers "topo")
    from torch_topo import group_settings

    os.environ.update(env_by_rank[rank])
    # Plays a release whose defaults differ from this one's in the fields given.
    group_settings._DEFAULTS = {**group_settings._DEFAULTS, **defaults_by_rank[rank]}
    try:
        dist.init_process_group("topo", store=dist.FileStore(store_path, WORLD), rank=rank,
                                world_size=WORLD, timeout=timedelta(seconds=60),
                                pg_options=options_by_rank[rank])
        x = torch.full((3,), float(rank + 1))
        dist.all_reduce(x)
        result = {"sum": x.tolist()}
        dist.destroy_process_group()
    except Exception as exc:  # reported to the test, which asserts on it
        result = {"type": type(exc).__name__, "error": str(exc)}
    Path(out_dir, f"{rank}.json").write_text(json.dumps(result))


def _run(tmp_path, env_by_rank, options_by_rank=(None,) * WORLD,
         defaults_by_rank=({},) * WORLD) -> list[dict]:
    start_processes(_main, args=(str(tmp_path / "store"), str(tmp_path), env_by_rank,
                                 list(options_by_rank), list(defaults_by_rank)), nprocs=WORLD)
    return [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(WORLD)]


# (variable, field, value on ranks 0 and 1, value on rank 2 (None: unset), as the error shows
# them: rank 2's, then rank 0's)
CASES = [
    ("TORCH_TOPO_AWARE", "use_topo_aware_collectives", "1", "0", "False", "True"),
    ("TORCH_TOPO_HIERARCHICAL", "hierarchical", "always", "never", "'never'", "'always'"),
    ("TORCH_TOPO_CHUNK_BYTES", "pipeline_chunk_bytes", "1048576", None, str(4 << 20), "1048576"),
    ("TORCH_TOPO_INTER_HOST_GBPS", "inter_host_gbps", "12.5", None, "unset", "12.5"),
    ("TORCH_TOPO_INTER_HOST_LATENCY_US", "inter_host_latency_us", "5", "7.5", "7.5", "5.0"),
    ("TORCH_TOPO_NCCL_HINTS", "nccl_hints", "0", "1", "True", "False"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("var, field, common, odd, shown_odd, shown_common", CASES,
                         ids=[c[0] for c in CASES])
def test_a_setting_that_differs_on_one_rank_fails_every_rank_naming_it(
        tmp_path, monkeypatch, var, field, common, odd, shown_odd, shown_common):
    for name in (var, "TORCH_TOPO_FILE", "TORCH_TOPO_PLAY"):
        monkeypatch.delenv(name, raising=False)
    env = [{var: common}, {var: common}, {} if odd is None else {var: odd}]
    expected = (f"topo backend: {var} (TopoConfig.{field}) is {shown_odd} on group rank 2 but "
                f"{shown_common} on group rank 0; expected one value on every rank")
    for result in _run(tmp_path, env):
        assert result["type"] == "TopoMismatchError", result
        assert result["error"].startswith(expected), result


@pytest.mark.timeout(120)
def test_pg_options_that_differ_fail_alike(tmp_path):
    options = [{"hierarchical": "never"}, {"hierarchical": "never"}, None]
    for result in _run(tmp_path, [{}] * WORLD, options):
        assert result["error"].startswith(
            "topo backend: TORCH_TOPO_HIERARCHICAL (TopoConfig.hierarchical) is 'auto' on group "
            "rank 2 but 'never' on group rank 0"), result


@pytest.mark.timeout(120)
def test_rank_local_settings_may_differ(tmp_path):
    # Debug output, timeout and NUMA binding are each rank's own; equal shared settings given
    # once through the environment and once through pg_options are one setting.
    env = [{"TORCH_TOPO_DEBUG": "1", "TORCH_TOPO_HIERARCHICAL": "never"},
           {"TORCH_TOPO_TIMEOUT": "90", "TORCH_TOPO_HIERARCHICAL": "never"},
           {"TORCH_TOPO_BIND_NUMA": "0"}]
    options = [None, None, {"hierarchical": "never"}]
    assert _run(tmp_path, env, options) == [{"sum": [6.0] * 3}] * WORLD


@pytest.mark.timeout(120)
def test_a_release_with_other_defaults_is_told_apart(tmp_path, monkeypatch):
    # Rank 2 plays a release whose default chunk is 1 MiB and runs with it; it publishes no
    # setting of its own, which ranks 0 and 1 would read as their own 4 MiB default.
    monkeypatch.delenv("TORCH_TOPO_CHUNK_BYTES", raising=False)
    env = [{}, {}, {"TORCH_TOPO_CHUNK_BYTES": str(1 << 20)}]
    defaults = [{}, {}, {"pipeline_chunk_bytes": 1 << 20}]
    for result in _run(tmp_path, env, defaults_by_rank=defaults):
        assert result["type"] == "TopoMismatchError", result
        assert result["error"].startswith(
            "topo backend: group rank 2 runs a torch-topo whose default settings differ from "
            "group rank 0's (digest "), result
        assert "expected the same torch-topo on every rank of a group" in result["error"]


@pytest.mark.timeout(120)
def test_a_bad_setting_on_one_rank_fails_every_rank_at_once(tmp_path, monkeypatch):
    # The bad rank raised before publishing its settings; the others waited out the group's
    # timeout for them and raised a TimeoutError blaming a crashed rank.
    monkeypatch.delenv("TORCH_TOPO_HIERARCHICAL", raising=False)
    env = [{}, {}, {"TORCH_TOPO_HIERARCHICAL": "sometimes"}]
    results = _run(tmp_path, env)
    for rank, result in enumerate(results):
        assert result["type"] == "ValueError", result
        assert "TORCH_TOPO_HIERARCHICAL" in result["error"] and "'sometimes'" in result["error"]
        assert ("(raised on group rank 2" in result["error"]) == (rank != 2), result


@pytest.mark.timeout(120)
def test_nccl_topo_file_pins_the_backend_topology(tmp_path, monkeypatch):
    # NCCL's own variable pins the topology as TORCH_TOPO_FILE does: the backend rebuilt its
    # config with every field given, topology_file=None among them ("no pinned file"), so it
    # probed the live host and took a play of GPU 9 on an 8-GPU file without a word.
    dgx1 = Path(__file__).resolve().parents[2] / "data" / "nvidia_smi_topo" / \
        "dgx1like_8xV100-SXM2_hybridcube_1xEDR_oneflow.txt"
    monkeypatch.delenv("TORCH_TOPO_FILE", raising=False)
    env = [{"NCCL_TOPO_FILE": str(dgx1), "TORCH_TOPO_PLAY": "a:0,a:1,b:9"}] * WORLD
    for result in _run(tmp_path, env):
        assert result["type"] == "ValueError", result
        assert "GPU 9 on 'b'" in result["error"] and "has 8 GPUs, expected 0..7" in result["error"]
