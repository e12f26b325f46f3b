# SPDX-License-Identifier: Apache-2.0
"""TopoConfig: validation, the TORCH_TOPO_* environment, and one observed effect per field on a
real "topo" process group (two processes: each group is created with one field changed and the
test reads back what the backend did)."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import pickle
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from rank_processes import start_processes

from torch_topo import TopoConfig
from torch_topo.config import ENV_VARS, OTHER_VARS, parse_bool

DATA = Path(__file__).resolve().parents[1] / "data"
P4D = str(DATA / "nccl_topo_xml" / "aws_p4d.24xlarge_8xA100_topo.xml")
BOOL_FIELDS = [f.name for f in dataclasses.fields(TopoConfig) if "bool" in f.type]


def test_env_sets_fields_and_overrides_win():
    cfg = TopoConfig.from_env(
        {"TORCH_TOPO_TIMEOUT": "7.5", "TORCH_TOPO_AWARE": "0", "TORCH_TOPO_CHUNK_BYTES": "65536"},
        bind_numa=True,
    )
    assert cfg.timeout_s == 7.5
    assert cfg.use_topo_aware_collectives is False
    assert cfg.pipeline_chunk_bytes == 65536
    assert cfg.bind_numa is True


# A given field beats its variable whatever the two values are, the default included.
_PRECEDENCE = [
    ("debug", False, "TORCH_TOPO_DEBUG", "1", True),
    ("debug", True, "TORCH_TOPO_DEBUG", "0", False),
    ("hierarchical", "auto", "TORCH_TOPO_HIERARCHICAL", "never", "never"),
    ("use_topo_aware_collectives", True, "TORCH_TOPO_AWARE", "off", False),
    ("pipeline_chunk_bytes", 4 << 20, "TORCH_TOPO_CHUNK_BYTES", "65536", 65536),
    ("timeout_s", None, "TORCH_TOPO_TIMEOUT", "7", 7.0),
    ("topology_file", None, "TORCH_TOPO_FILE", "/x.xml", "/x.xml"),
]


@pytest.mark.parametrize("field, given, var, text, from_env", _PRECEDENCE)
def test_a_given_field_wins_over_its_variable_whatever_its_value(monkeypatch, field, given, var,
                                                                 text, from_env):
    for name in ENV_VARS.values():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(var, text)
    assert getattr(TopoConfig(**{field: given}).merged_with_env(), field) == given
    # Not given, the variable sets it; a config built from the environment keeps it.
    assert getattr(TopoConfig().merged_with_env(), field) == from_env
    assert getattr(TopoConfig.from_env().merged_with_env(), field) == from_env
    # Other fields still come from the environment.
    other = "timeout_s" if field != "timeout_s" else "debug"
    monkeypatch.setenv(ENV_VARS[other], "1")
    assert getattr(TopoConfig(**{field: given}).merged_with_env(), other) == 1


def test_explicit_fields_are_the_given_ones():
    assert TopoConfig().explicit_fields == frozenset()
    cfg = TopoConfig(debug=False, hierarchical="auto")
    assert cfg.explicit_fields == {"debug", "hierarchical"}
    assert cfg == TopoConfig()  # equality compares values only
    assert TopoConfig.from_env({"TORCH_TOPO_DEBUG": "1"}, play="a:0").explicit_fields == {
        "debug", "play"}
    assert dataclasses.replace(cfg, debug=True).explicit_fields == {f.name for f in
                                                                     dataclasses.fields(cfg)}
    # with_fields adds to the given ones only (the backend's timeout must not pin the rest).
    changed = cfg.with_fields(debug=True, timeout_s=5.0)
    assert changed.explicit_fields == {"debug", "hierarchical", "timeout_s"}
    assert (changed.debug, changed.hierarchical, changed.timeout_s) == (True, "auto", 5.0)
    with pytest.raises(ValueError, match="timeout_s"):
        cfg.with_fields(timeout_s=-1.0)
    assert {f.name for f in dataclasses.fields(TopoConfig)} == set(ENV_VARS)


def test_pg_options_keep_their_given_defaults(monkeypatch):
    from torch_topo.backend import resolve_config

    monkeypatch.setenv("TORCH_TOPO_DEBUG", "1")
    monkeypatch.setenv("TORCH_TOPO_HIERARCHICAL", "never")
    for options in (TopoConfig(debug=False, hierarchical="auto"),
                    {"debug": False, "hierarchical": "auto"}):
        cfg = resolve_config(options)
        assert (cfg.debug, cfg.hierarchical) == (False, "auto")
    cfg = resolve_config(None)
    assert (cfg.debug, cfg.hierarchical) == (True, "never")


def test_other_torch_topo_variables_are_accepted():
    for var in OTHER_VARS:
        assert TopoConfig.from_env({var: "x"}) == TopoConfig()
    assert "TORCH_TOPO_TEST_BACKEND" in OTHER_VARS


@pytest.mark.parametrize("field", BOOL_FIELDS)
@pytest.mark.parametrize("text, value", [
    ("1", True), ("true", True), ("TRUE", True), ("Yes", True), ("on", True), (" On ", True),
    ("0", False), ("false", False), ("False", False), ("NO", False), ("off", False),
])
def test_booleans_parse_the_same_for_every_field(field, text, value):
    assert getattr(TopoConfig.from_env({ENV_VARS[field]: text}), field) is value


@pytest.mark.parametrize("field", BOOL_FIELDS)
def test_bad_boolean_names_its_variable(field):
    with pytest.raises(ValueError, match=f"{ENV_VARS[field]}: got 'maybe', expected one of"):
        TopoConfig.from_env({ENV_VARS[field]: "maybe"})


def test_empty_variable_counts_as_unset():
    assert TopoConfig.from_env({"TORCH_TOPO_AWARE": "", "TORCH_TOPO_TIMEOUT": " "}) == TopoConfig()


@pytest.mark.parametrize("environ", ["TORCH_TOPO_DEBUG=1", [("TORCH_TOPO_DEBUG", "1")]])
def test_environ_that_is_no_mapping_is_named(environ):
    # A string failed with "'str' object has no attribute 'get'", a list of pairs with
    # "'tuple' object has no attribute 'startswith'".
    with pytest.raises(ValueError, match=r"^TopoConfig.from_env: environ: got (str|list), "
                                         r"expected None or a mapping"):
        TopoConfig.from_env(environ)


def test_parse_bool_is_the_one_parser():
    assert parse_bool("X", "oN") is True and parse_bool("X", "oFF") is False
    with pytest.raises(ValueError, match="X: got '2'"):
        parse_bool("X", "2")


@pytest.mark.parametrize(
    "env, fragment",
    [
        ({"TORCH_TOPO_NOPE": "1"}, "unknown variable TORCH_TOPO_NOPE"),
        ({"TORCH_TOPO_AWARE": "maybe"}, "TORCH_TOPO_AWARE: got 'maybe'"),
        ({"TORCH_TOPO_TIMEOUT": "-1"}, "TORCH_TOPO_TIMEOUT: TopoConfig.timeout_s: got -1.0"),
        ({"TORCH_TOPO_TIMEOUT": "soon"}, "TORCH_TOPO_TIMEOUT: got 'soon', expected a number"),
        ({"TORCH_TOPO_TIMEOUT": "inf"}, "TORCH_TOPO_TIMEOUT: TopoConfig.timeout_s: got inf"),
        ({"TORCH_TOPO_INTER_HOST_GBPS": "nan"},
         "TORCH_TOPO_INTER_HOST_GBPS: TopoConfig.inter_host_gbps: got nan"),
        ({"TORCH_TOPO_HIERARCHICAL": "sometimes"},
         "TORCH_TOPO_HIERARCHICAL: TopoConfig.hierarchical: got 'sometimes'"),
        ({"TORCH_TOPO_CHUNK_BYTES": "12"},
         "TORCH_TOPO_CHUNK_BYTES: TopoConfig.pipeline_chunk_bytes: got 12"),
        ({"TORCH_TOPO_INTER_HOST_GBPS": "0"},
         "TORCH_TOPO_INTER_HOST_GBPS: TopoConfig.inter_host_gbps: got 0.0"),
        ({"TORCH_TOPO_INTER_HOST_LATENCY_US": "1ms"},
         "TORCH_TOPO_INTER_HOST_LATENCY_US: got '1ms', expected a number"),
        ({"TORCH_TOPO_INTER_HOST_LATENCY_US": "-5"},
         "TORCH_TOPO_INTER_HOST_LATENCY_US: TopoConfig.inter_host_latency_us: got -5.0"),
        ({"TORCH_TOPO_TIMEOUT": "1e10"},
         "TORCH_TOPO_TIMEOUT: TopoConfig.timeout_s: got 10000000000.0, expected"),
        ({"TORCH_TOPO_CHUNK_BYTES": str(2**41)},
         f"TORCH_TOPO_CHUNK_BYTES: TopoConfig.pipeline_chunk_bytes: got {2**41}"),
    ],
)
def test_bad_values_name_the_variable(env, fragment):
    with pytest.raises(ValueError, match=fragment):
        TopoConfig.from_env(env)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"use_topo_aware_collectives": "0"}, "TopoConfig.use_topo_aware_collectives: got '0'"),
        ({"debug": "no"}, "TopoConfig.debug: got 'no'"),
        ({"bind_numa": 1}, "TopoConfig.bind_numa: got 1"),
        ({"timeout_s": "5"}, "TopoConfig.timeout_s: got '5'"),
        ({"timeout_s": True}, "TopoConfig.timeout_s: got True"),
        ({"pipeline_chunk_bytes": 4096.0}, "TopoConfig.pipeline_chunk_bytes: got 4096.0"),
        ({"topology_file": 3}, "TopoConfig.topology_file: got 3"),
        ({"inter_host_gbps": float("inf")}, "TopoConfig.inter_host_gbps: got inf"),
        # Values of the right type that failed only far away: 2**70 as a pybind11 TypeError at
        # group creation, 1e300 s as an OverflowError in timedelta, 1e-4 s as a 0 ms timeout
        # that expired every wait at once, 1e300 GB/s as a network of no cost.
        ({"pipeline_chunk_bytes": 2**70}, r"TopoConfig.pipeline_chunk_bytes: got "
                                          r"1180591620717411303424, expected >= 1024 and <= "
                                          r"1099511627776"),
        ({"timeout_s": 1e300}, r"TopoConfig.timeout_s: got 1e\+300, expected >= 0.001 and <= "
                               r"5e\+09 seconds"),
        ({"timeout_s": 1e-4}, r"TopoConfig.timeout_s: got 0.0001, expected >= 0.001"),
        ({"inter_host_gbps": 1e300}, r"TopoConfig.inter_host_gbps: got 1e\+300, expected >= "
                                     r"1e-06 and <= 1e\+06 GB/s"),
        ({"inter_host_gbps": 1e-9}, r"TopoConfig.inter_host_gbps: got 1e-09"),
        ({"inter_host_latency_us": 2e6}, r"TopoConfig.inter_host_latency_us: got 2000000.0, "
                                         r"expected >= 1e-06 and <= 1e\+06 us"),
        ({"inter_host_latency_us": "50"}, r"TopoConfig.inter_host_latency_us: got '50'"),
    ],
)
def test_bad_field_types_name_the_field(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        TopoConfig(**kwargs)


def test_fields_cannot_be_changed_past_their_checks():
    # `cfg.timeout_s = "x"` was taken and failed only at group creation, far from the cause.
    cfg = TopoConfig(timeout_s=5.0)
    with pytest.raises(dataclasses.FrozenInstanceError, match="timeout_s"):
        cfg.timeout_s = "x"
    changed = dataclasses.replace(cfg, hierarchical="never")
    assert (changed.timeout_s, changed.hierarchical, cfg.hierarchical) == (5.0, "never", "auto")
    with pytest.raises(ValueError, match="TopoConfig.timeout_s: got 'x'"):
        dataclasses.replace(cfg, timeout_s="x")


@pytest.mark.parametrize("copy_of", [copy.copy, copy.deepcopy,
                                     lambda c: pickle.loads(pickle.dumps(c))],
                         ids=["copy", "deepcopy", "pickle"])
def test_copies_keep_which_fields_were_given(copy_of, monkeypatch):
    # Frozen, the config pickled and copied its fields only: the copy had no given fields, so
    # TORCH_TOPO_DEBUG=1 overrode debug=False given to the original (as a spawned rank got it).
    monkeypatch.setenv("TORCH_TOPO_DEBUG", "1")
    monkeypatch.setenv("TORCH_TOPO_HIERARCHICAL", "never")
    cfg = TopoConfig(debug=False, timeout_s=5.0)
    copied = copy_of(cfg)
    assert copied == cfg and copied.explicit_fields == {"debug", "timeout_s"}
    merged = copied.merged_with_env()
    assert (merged.debug, merged.timeout_s, merged.hierarchical) == (False, 5.0, "never")


def test_a_field_given_as_none_switches_its_variable_off(monkeypatch):
    # A field given to TopoConfig wins over its variable whatever its value (README); play and
    # topology_file given as None fell back to TORCH_TOPO_PLAY and TORCH_TOPO_FILE.
    from torch_topo import cluster
    from torch_topo.probe import resolve_pinned_file

    monkeypatch.delenv("NCCL_TOPO_FILE", raising=False)
    monkeypatch.setenv("TORCH_TOPO_FILE", P4D)
    monkeypatch.setenv("TORCH_TOPO_PLAY", "hostX:1,hostY:1")
    assert resolve_pinned_file(TopoConfig()) == P4D
    for cfg in (TopoConfig(topology_file=None), TopoConfig(topology_file=None).merged_with_env()):
        assert resolve_pinned_file(cfg) is None
    assert TopoConfig().effective("play") == "hostX:1,hostY:1"
    assert TopoConfig(play=None).effective("play") is None
    played = cluster.own_record(TopoConfig(), 2, 0)
    assert (played["hostname"], played["local_device"]) == ("hostX", 1)
    live = cluster.own_record(TopoConfig(play=None).merged_with_env(), 2, 0)
    assert live["hostname"] not in ("hostX", "hostY")
    # A blank variable is unset, as TopoConfig.from_env reads it.
    monkeypatch.setenv("TORCH_TOPO_FILE", "  ")
    assert resolve_pinned_file(TopoConfig()) is None


def test_unknown_field_is_a_type_error():
    with pytest.raises(TypeError, match="no_such_field"):
        TopoConfig(no_such_field=1)


def test_every_field_has_a_variable_and_an_effect_case():
    names = {f.name for f in dataclasses.fields(TopoConfig)}
    assert set(ENV_VARS) == names
    # bind_numa and nccl_hints have their own tests (test_numa.py, test_nccl_hints in
    # tests/py/backend); every other field is exercised below.
    assert names - {"bind_numa", "nccl_hints"} == set(_EFFECT_FIELDS)


_EFFECT_FIELDS = ("timeout_s", "use_topo_aware_collectives", "hierarchical",
                  "pipeline_chunk_bytes", "topology_file", "play", "inter_host_gbps",
                  "inter_host_latency_us", "debug")


def _topo_group(cfg, env=None):
    """A new "topo" group over both ranks with `cfg` (or, when None, the environment `env`),
    from a fresh exchange; returns (group, its C++ backend)."""
    from torch_topo import cluster

    cluster._exchanges.clear()  # each case must probe again under its own config
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        group = dist.new_group(backend="topo", pg_options=cfg)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
    return group, group._get_backend(torch.device("cpu"))


def _last_choice(group, backend, numel: int = 256) -> str:
    dist.all_reduce(torch.ones(numel), group=group)
    return backend.last_decisions()[-1][2]


def _stderr_during(action) -> str:
    """What `action()` writes to file descriptor 2 (the C++ backend's log included)."""
    read_fd, write_fd = os.pipe()
    saved = os.dup(2)
    sys.stderr.flush()
    os.dup2(write_fd, 2)
    try:
        action()
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(write_fd)
    with os.fdopen(read_fd) as f:
        return f.read()


_PREDICTED_64K = (r"cpu predicted all_reduce 64 KiB: flat ring ([\d.]+) us, hierarchical "
                  r"([\d.]+) us -> (\w+);")


def _init_world(rank: int, world: int, store_path: str) -> None:
    """A spawned rank's world group (plain Gloo), with "topo" registered for its groups."""
    import torch_topo  # noqa: F401  (registers "topo")

    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank,
                            world_size=world, timeout=timedelta(seconds=60))


def _report(seen, rank: int, out_dir: str) -> None:
    """A spawned rank's findings for the test (_ranks_seen), then its world's end."""
    Path(out_dir, f"{rank}.json").write_text(json.dumps(seen))
    dist.barrier()
    dist.destroy_process_group()


def _ranks_seen(main, world: int, tmp_path, monkeypatch) -> list:
    """What each of `world` spawned ranks running `main(rank, world, store_path, out_dir)`
    reported, with no TORCH_TOPO_* variable nor NCCL_TOPO_FILE set."""
    for var in ENV_VARS.values():
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("NCCL_TOPO_FILE", raising=False)
    start_processes(main, args=(world, str(tmp_path / "store"), str(tmp_path)), nprocs=world)
    return [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in range(world)]


def _effects_main(rank, world, store_path, out_dir):
    from torch_topo import cluster, hierarchy

    _init_world(rank, world, store_path)
    chunks = []
    real_build_levels = hierarchy.build_levels

    def recording_build_levels(*args, **kwargs):
        chunks.append(kwargs["chunk_bytes"])
        return real_build_levels(*args, **kwargs)

    hierarchy.build_levels = recording_build_levels
    two_hosts = "a:0,b:0"
    seen = {}
    _, b = _topo_group(TopoConfig(timeout_s=7.0))
    seen["timeout_s"] = b.inner_backend("cpu").options._timeout.total_seconds()
    always = dict(play=two_hosts, hierarchical="always")
    seen["use_topo_aware_collectives"] = [
        _last_choice(*_topo_group(TopoConfig(**always, use_topo_aware_collectives=on)))
        for on in (True, False)]
    seen["hierarchical"] = [_last_choice(*_topo_group(TopoConfig(play=two_hosts, hierarchical=h)))
                            for h in ("always", "never")]
    # A group across hosts of CPU ranks: the size rule decides, and its predictions are printed
    # as the cost model's are for GPU ranks (before, only the thresholds were).
    # Without a topology file no cluster carries inter_host_gbps: the rule must take it.
    predicted = []
    for gbps in (None, 12.5):
        cfg = TopoConfig(play=two_hosts, debug=True, inter_host_gbps=gbps)
        text = _stderr_during(lambda: _topo_group(cfg))  # noqa: B023  (called at once)
        predicted += re.findall(_PREDICTED_64K, text)
    chunks.clear()
    for size in (2048, 8192):
        _topo_group(TopoConfig(**always, pipeline_chunk_bytes=size))
    seen["pipeline_chunk_bytes"] = list(chunks)  # later groups record theirs too
    _topo_group(TopoConfig(topology_file=P4D, play="hostA:0,hostA:5", inter_host_gbps=12.5,
                           hierarchical="never"))
    live = cluster.world_cluster()
    seen["topology_file"] = [h.gpu_count for h in live.hosts]
    seen["play"] = [live.hostnames, [p.local_gpu for p in live.placements]]
    seen["inter_host_gbps"] = []
    for gbps in (None, 12.5):
        _topo_group(TopoConfig(topology_file=P4D, play="x:0,y:0", inter_host_gbps=gbps,
                               hierarchical="never"))
        seen["inter_host_gbps"].append(cluster.world_cluster().inter_host_bandwidth_gbps)
    latency = seen["inter_host_latency_us"] = {"cluster": [], "one_step": [], "predicted": []}
    for us in (None, 1000.0):
        _topo_group(TopoConfig(topology_file=P4D, play="x:0,y:0", inter_host_latency_us=us,
                               hierarchical="never"))
        latency["cluster"].append(cluster.world_cluster().inter_host_latency_us)
        cfg = TopoConfig(play=two_hosts, debug=True, inter_host_latency_us=us)
        text = _stderr_during(lambda: _topo_group(cfg))  # noqa: B023  (called at once)
        latency["one_step"] += re.findall(r"one-step all_reduce to (\d+) B", text)
        latency["predicted"] += re.findall(_PREDICTED_64K, text)
    debug = []
    for cfg, env in ((TopoConfig(debug=True), None), (TopoConfig(debug=False), None),
                     (None, {"TORCH_TOPO_DEBUG": "false"}), (None, {"TORCH_TOPO_DEBUG": "On"})):
        group, b = _topo_group(cfg, env)
        text = _stderr_during(lambda: _last_choice(group, b))  # noqa: B023  (called at once)
        # Each decision line says which path and why (the cost model's crossover, no levels...).
        debug.append(re.search(r"allreduce \d+ bytes on cpu: (flat|hierarchical) \(\w", text,
                               re.IGNORECASE) is not None)
    seen["debug"] = {"decisions": debug, "predicted": predicted}
    _report(seen, rank, out_dir)


@pytest.mark.timeout(300)
def test_each_field_has_its_effect_on_a_topo_group(tmp_path, monkeypatch):
    for seen in _ranks_seen(_effects_main, 2, tmp_path, monkeypatch):
        assert set(seen) == set(_EFFECT_FIELDS)
        assert seen["timeout_s"] == 7.0
        assert seen["use_topo_aware_collectives"] == ["hierarchical", "flat"]
        assert seen["hierarchical"] == ["hierarchical", "flat"]
        assert seen["pipeline_chunk_bytes"] == [2048, 8192]
        assert seen["topology_file"] == [8]  # the p4d's eight GPUs, one played host
        assert seen["play"] == [["hostA"], [0, 5]]
        # Unpinned, the p4d file names no NIC speed; pinned, the config's figure is used.
        assert seen["inter_host_gbps"] == [0.0, 12.5]
        assert seen["debug"]["decisions"] == [True, False, False, True]
        # docs/schedules.md's rule by hand for hosts of one rank, a us between them (50
        # assumed), 30 us per inner collective: flat 2 (a + 30) us, two levels 2 a + 3 x 30 us,
        # each plus 64 KiB over the link: 10 GbE (1.25 GB/s) assumed, or the configured figure.
        cases = [(1.25, 50.0), (12.5, 50.0), (1.25, 50.0), (1.25, 1000.0)]
        predicted = seen["debug"]["predicted"] + seen["inter_host_latency_us"]["predicted"]
        for (flat, hier, taken), (gbps, a) in zip(predicted, cases, strict=True):
            link_us = 65536 / (gbps * 1e9) * 1e6
            assert float(flat) == pytest.approx(2 * (a + 30) + link_us, abs=0.05)
            assert float(hier) == pytest.approx(2 * a + 90 + link_us, abs=0.05)
            assert taken == "flat"
        # Unpinned, NCCL's network hop (link_tables.h); the Gloo pair's one exchange runs while
        # the latency saved outweighs a pass over the bytes at 5 GB/s (50 us floor for TCP),
        # to 1 MiB at most.
        assert seen["inter_host_latency_us"]["cluster"] == [2.7, 1000.0]
        assert seen["inter_host_latency_us"]["one_step"] == [str(50 * 5000), str(1 << 20)]


def _issued(group, rank: int, world: int) -> tuple[list[str], list[list[float]]]:
    """The Gloo calls (profiler titles "gloo:<op>") one sequence of collectives on `group`
    issues, and the results it computes."""
    x = torch.arange(8 * world, dtype=torch.float32) + rank
    block, whole = torch.zeros(8), torch.zeros(8 * world)
    blocks = [torch.zeros(8) for _ in range(world)]
    results = []
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for step in (
            lambda: dist.all_reduce(block.copy_(x[:8] * (rank + 1)), group=group),
            lambda: dist.reduce_scatter_tensor(block, x, group=group),
            lambda: dist.reduce_scatter(block, list(x.chunk(world)), group=group),
            lambda: dist.all_gather_into_tensor(whole, x[:8] * (rank + 1), group=group),
            lambda: dist.all_gather(blocks, x[:8] * (rank + 2), group=group),
            lambda: dist.broadcast(block, 0, group=group),
        ):
            step()
            results.append(torch.cat([block, whole, *blocks]).tolist())
    return [e.name for e in prof.events() if e.name.startswith("gloo:")], results


def _plain_main(rank, world, store_path, out_dir):
    _init_world(rank, world, store_path)
    # Two played hosts and "always": what would run hierarchically and as one-step exchanges
    # where the switch is on.
    two_hosts = dict(topology_file=P4D, play=",".join(f"h{r % 2}:{r // 2}" for r in range(world)),
                     hierarchical="always")
    seen = {"gloo": _issued(dist.new_group(backend="gloo"), rank, world)}
    for name, cfg, env in (("off", TopoConfig(**two_hosts, use_topo_aware_collectives=False), None),
                           ("env", None, {"TORCH_TOPO_AWARE": "0", "TORCH_TOPO_FILE": P4D,
                                          "TORCH_TOPO_PLAY": two_hosts["play"],
                                          "TORCH_TOPO_HIERARCHICAL": "always"}),
                           ("on", TopoConfig(**two_hosts), None)):
        seen[name] = _issued(_topo_group(cfg, env)[0], rank, world)
    _report(seen, rank, out_dir)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world", [2, 4])
def test_aware_off_issues_exactly_what_plain_gloo_does(tmp_path, monkeypatch, world):
    for seen in _ranks_seen(_plain_main, world, tmp_path, monkeypatch):
        calls, values = seen["gloo"]
        assert calls and "gloo:all_to_all" not in calls
        # Off, from the config or from TORCH_TOPO_AWARE=0: the same Gloo calls, same results.
        assert seen["off"] == [calls, values]
        assert seen["env"] == [calls, values]
        # On, the same program issues other calls (one-step exchanges, levels): the comparison
        # can tell; the results agree.
        assert seen["on"][0] != calls and seen["on"][1] == values


_CELL = re.compile(r"(\d+) (KiB|MiB|GiB): flat \S+ ([\d.]+) us, hierarchical ([\d.]+) us -> (\w+)")


def _predictions_main(rank, world, store_path, out_dir):
    _init_world(rank, world, store_path)
    seen = []
    for gbps in (None, 12.5):
        cfg = TopoConfig(play="a:0,a:1,b:0,b:1", debug=True, inter_host_gbps=gbps)
        group = None

        def create(cfg=cfg):
            nonlocal group
            group = _topo_group(cfg)

        text = _stderr_during(create)
        (line,) = [ln for ln in text.splitlines() if "cpu predicted all_reduce " in ln]
        taken = []
        for count, unit, flat_us, hier_us, side in _CELL.findall(line):
            nbytes = int(count) << {"KiB": 10, "MiB": 20, "GiB": 30}[unit]
            if nbytes <= 16 << 20:
                faster = "hierarchical" if float(hier_us) < float(flat_us) else "flat"
                taken.append([side, _last_choice(*group, numel=nbytes // 4), faster])
        seen.append(taken)
    _report(seen, rank, out_dir)


@pytest.mark.timeout(300)
def test_debug_predictions_name_the_side_the_group_takes(tmp_path, monkeypatch):
    # Two hosts of two CPU ranks: TORCH_TOPO_DEBUG's predicted lines must name the side each
    # all_reduce then takes, and that side is the faster of the two printed times. At 12.5 GB/s
    # hierarchical is the faster side to 1 MiB only: one threshold "from a size up" kept the
    # group flat at every size, so it ran the slower side at 64 KiB and 1 MiB.
    for seen in _ranks_seen(_predictions_main, 4, tmp_path, monkeypatch):
        assert [len(taken) for taken in seen] == [3, 3]  # 64 KiB, 1 MiB, 16 MiB
        for taken in seen:
            for printed, done, faster in taken:
                assert printed == done == faster
        assert {done for _, done, _ in seen[1]} == {"flat", "hierarchical"}


@pytest.mark.parametrize("argv", [["show", P4D], ["convert", P4D, "--to", "json"],
                                  ["plan", P4D, "--mesh", "dp=8"]])
def test_every_cli_verb_refuses_a_bad_variable(argv, monkeypatch, capsys):
    from torch_topo.cli import main

    monkeypatch.setenv("TORCH_TOPO_FOO", "1")
    assert main(argv) == 2
    assert "unknown variable TORCH_TOPO_FOO" in capsys.readouterr().err
    monkeypatch.delenv("TORCH_TOPO_FOO")
    monkeypatch.setenv("TORCH_TOPO_TIMEOUT", "inf")
    assert main(argv) == 2
    assert "TORCH_TOPO_TIMEOUT: TopoConfig.timeout_s: got inf" in capsys.readouterr().err


def test_a_group_timeout_out_of_range_names_init_process_group(tmp_path):
    # 0.5 ms reached Gloo as 0 ms ("Timed out waiting 0ms" at the first wait); the bound is
    # TopoConfig's, but the value came from init_process_group, and the message must say so.
    script = (
        "import datetime, torch.distributed as dist, torch_topo\n"
        f"store = dist.FileStore({str(tmp_path / 'store')!r}, 1)\n"
        "dist.init_process_group('topo', store=store, rank=0, world_size=1,\n"
        "                        timeout=datetime.timedelta(microseconds=500))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_TOPO_")}
    # Outside the checkout: `-c` puts the working folder first on sys.path, and the checkout's
    # in-place module may be built for another torch than the one under test.
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert done.returncode != 0
    assert ("topo backend: the process group's timeout: TopoConfig.timeout_s: got 0.0005, "
            "expected >= 0.001") in done.stderr
