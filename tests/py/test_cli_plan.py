# SPDX-License-Identifier: Apache-2.0
"""Tests of the `plan` and `doctor` CLI verbs: JSON keys, --compare naive, exit codes, error
messages naming the option, findings, and a freeze of their option sets."""

from __future__ import annotations

import json

import pytest
from json_position import position
from planner_support import DATA, DGX1, played_cpu_ranks

from torch_topo import _C, AttentionShape
from torch_topo.cli import build_parser, main
from torch_topo.plan import MAX_RANKS, plan

A100_SXM = DATA / "nvidia_smi_topo" / "a100_8xSXM_NV12_2numa_mlengineering_realigned.txt"


def _options(verb: str) -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "verb")
    return {s for a in sub.choices[verb]._actions for s in a.option_strings}


def test_option_sets_are_frozen():
    assert _options("plan") == {"-h", "--help", "--mesh", "--hosts", "--traffic", "--compare",
                                "--attention", "--nvlink", "--nvlink-domain-hosts",
                                "--nccl-version", "--json"}
    assert _options("doctor") == {"-h", "--help", "--mesh", "--hosts", "--nvlink",
                                  "--nvlink-domain-hosts", "--kv-heads", "--json"}
    assert _options("bench") == {"-h", "--help", "--collectives", "--min-bytes", "--max-bytes",
                                 "--factor", "--reps", "--dtype", "--procs", "--topology",
                                 "--min-fraction", "--check", "--plot", "--json",
                                 "--published", "--op", "--hosts", "--ranks-per-host", "--sm",
                                 "--nic-gbit", "--nics", "--nccl-version", "--algo",
                                 "--nvlink-domain-hosts", "--nvlink"}


def test_plan_json(capsys):
    assert main(["plan", str(DGX1), "--mesh", "dp=4,tp=2", "--json", "--compare", "naive"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mesh_dim_names"] == ["dp", "tp"] and out["mesh_shape"] == [4, 2]
    assert len(out["mesh"]) == 4 and all(len(row) == 2 for row in out["mesh"])
    assert sorted(r for g in out["groups"]["tp"] for r in g) == list(range(8))
    assert set(out["cost"]) == {"dp", "tp"} and out["cost"]["tp"] > 0
    assert out["compare"]["naive"]["groups"]["tp"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert out["compare"]["ratio"] > 1.0
    assert out["compare"]["ratio"] == pytest.approx(out["compare"]["naive"]["total_cost"] / out["total_cost"])


@pytest.mark.parametrize("gpus", [True, False])
def test_python_plan_prices_as_the_verb(tmp_path, capsys, monkeypatch, gpus):
    # A slow network between two DGX-1 makes the two-level schedule cheaper at some sizes: the
    # verb and plan() must both price the side the backend's ranges (GPU ranks) or size rule
    # (CPU ranks) take, not the cheaper one at every size.
    for var in ("TORCH_TOPO_HIERARCHICAL", "TORCH_TOPO_INTER_HOST_GBPS",
                "TORCH_TOPO_INTER_HOST_LATENCY_US"):
        monkeypatch.delenv(var, raising=False)
    doc = json.loads(_C.planner_cluster_json(path=str(DGX1), hosts=2))
    doc["inter_host_bandwidth_gbps"], doc["inter_host_latency_us"] = 3.0, 20.0
    if not gpus:
        for rank in doc["ranks"]:
            rank["local_gpu"] = -1
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(doc))
    assert main(["plan", str(path), "--mesh", "dp=8,tp=2", "--json"]) == 0
    verb = json.loads(capsys.readouterr().out)
    p = plan(str(path), {"dp": 8, "tp": 2}, nccl_hints=True)
    assert {d: p.cost(d) for d in ("dp", "tp")} == verb["cost"]
    assert p.algorithms == verb["algorithms"]
    assert p.nccl_hints == verb["nccl_hints"]


def test_plan_sequence_groups(capsys):
    assert main(["plan", str(DGX1), "--hosts", "2", "--mesh", "cp=2,sp=8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    seq = out["sequence_parallel"]
    assert seq["ulysses"]["dim"] == "sp" and seq["ring"]["dim"] == "cp"
    # Ulysses groups stay inside a host (all-to-all is the heavier exchange); ring crosses.
    for g in seq["ulysses"]["groups"]:
        assert len({r // 8 for r in g}) == 1
    assert all(len({r // 8 for r in g}) == 2 for g in seq["ring"]["groups"])


def test_plan_text(capsys):
    assert main(["plan", str(DGX1), "--mesh", "dp=4,tp=2", "--compare", "naive"]) == 0
    text = capsys.readouterr().out
    assert "planned layout" in text and "contiguous layout" in text and "x" in text


@pytest.mark.parametrize("argv,fragment", [
    (["--mesh", "dp=3,tp=2"], "mesh: product of sizes dp=3 x tp=2 = 6"),
    (["--mesh", "dp=4,xx=2"], "unknown dimension 'xx'"),
    (["--mesh", "dp4"], "--mesh: got 'dp4'"),
    (["--mesh", "dp=8", "--hosts", "0"], "--hosts: got 0"),
    (["--mesh", "dp=4,tp=2", "--traffic", "tp=abc"], "--traffic: got 'tp=abc'"),
    # A doubled or trailing comma is a typo, not an empty dimension.
    (["--mesh", "dp=8,tp=1,,"], "--mesh: an empty item in 'dp=8,tp=1,,'"),
    (["--mesh", "dp=4,,tp=2"], "--mesh: an empty item in 'dp=4,,tp=2'"),
    (["--mesh", "dp=4,tp=2", "--traffic", "tp=1e9,"], "--traffic: an empty item in 'tp=1e9,'"),
    (["--mesh", "dp=4,tp=2", "--traffic", "tp=1e9,tp=2e9"], "--traffic: 'tp' appears twice"),
    (["--mesh", "sp=8", "--attention", "heads=8,kv_heads=2,,head_dim=64,seq_len=64"],
     "--attention: an empty item in"),
    (["--mesh", "sp=8", "--attention", "heads=8,heads=4,kv_heads=2,head_dim=64,seq_len=64"],
     "--attention: 'heads' appears twice"),
    (["--mesh", "dp=4,tp=2", "--attention", "heads=8,kv_heads=2,head_dim=64,seq_len=64"],
     "--mesh: got {'dp': 4, 'tp': 2}, expected an 'sp' dimension for the sequence split"),
    (["--mesh", "dp=8", "--nccl-version", "2.26"], "--nccl-version: got '2.26'"),
    (["--mesh", "dp=8", "--nccl-version", "3.0.1"], "--nccl-version: got '3.0.1'"),
    (["--mesh", "dp=8", "--nccl-version", "2.x.1"], "--nccl-version: got '2.x.1'"),
])
def test_plan_errors_exit_2(argv, fragment, capsys):
    assert main(["plan", str(DGX1)] + argv) == 2
    assert fragment in capsys.readouterr().err


def test_plan_missing_file(capsys):
    assert main(["plan", "/nonexistent.txt", "--mesh", "tp=2"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_doctor_finds_contiguous_tp_on_dgx1(capsys, monkeypatch):
    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
    assert main(["doctor", str(DGX1), "--mesh", "dp=4,tp=2", "--json"]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    codes = {f["code"] for f in findings}
    assert "tp-weaker-links" in codes
    assert all(f["fix"] for f in findings)


def test_doctor_clean_box_exits_0(capsys, monkeypatch):
    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
    # NVSwitch box: every pair NV12, so any tp layout is as good as the planned one.
    assert main(["doctor", str(A100_SXM), "--mesh", "dp=2,tp=4"]) == 0
    assert "0 problem(s)" in capsys.readouterr().out


def test_doctor_findings(capsys, monkeypatch):
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1")
    assert main(["doctor", str(A100_SXM), "--hosts", "3", "--mesh", "dp=8,tp=3", "--kv-heads", "2",
                 "--json"]) == 1
    codes = {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert {"cuda-device-max-connections", "odd-tp"} <= codes
    assert main(["doctor", str(A100_SXM), "--mesh", "dp=2,sp=4", "--kv-heads", "2", "--json"]) == 1
    codes = {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "kv-heads-below-ulysses" in codes


def test_doctor_numa_crossing(capsys, monkeypatch):
    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
    # 8x A100 PCIe with NVLink bridges on pairs (0,1), (2,3)...: tp=4 contiguous {0,1,2,3} stays
    # on NUMA 0; relabelling is what breaks it, so check the doctor on dp-outer tp=2 instead.
    path = DATA / "nvidia_smi_topo" / "ncclTests178_8xA100-PCIe_NV12pairs_NODE_SYS.txt"
    assert main(["doctor", str(path), "--mesh", "tp=2,dp=4", "--json"]) == 1
    codes = {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "tp-crosses-numa" in codes


def test_plan_without_file_uses_pinned_file_then_probe(monkeypatch, capsys):
    assert main(["plan", str(DGX1), "--mesh", "dp=4,tp=2", "--json"]) == 0
    want = json.loads(capsys.readouterr().out)["mesh"]
    monkeypatch.setenv("TORCH_TOPO_FILE", str(DGX1))
    assert main(["plan", "--mesh", "dp=4,tp=2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mesh"] == want
    # No file at all: the live probe of this host (here replaced by the DGX-1's graph).
    import importlib

    from torch_topo.topology import load_topology

    probe_module = importlib.import_module("torch_topo.probe")  # the package re-exports probe()

    monkeypatch.delenv("TORCH_TOPO_FILE")
    monkeypatch.delenv("NCCL_TOPO_FILE", raising=False)
    probed = []
    monkeypatch.setattr(probe_module, "probe",
                        lambda config=None: probed.append(1) or load_topology(str(DGX1)))
    assert main(["plan", "--mesh", "dp=4,tp=2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mesh"] == want and probed == [1]


def test_plan_shows_the_nccl_hints_it_would_apply(capsys, monkeypatch):
    monkeypatch.delenv("TORCH_TOPO_NCCL_HINTS", raising=False)
    assert main(["plan", str(DGX1), "--hosts", "2", "--mesh", "dp=2,tp=8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # NCCL's own names for the collective and algorithm each dimension was costed with; NCCL
    # has Tree for all-reduce only, so other pairs get no hint.
    nccl = {("all_reduce", "ring"): "allreduce:ring", ("all_reduce", "tree"): "allreduce:tree",
            ("all_gather", "ring"): "allgather:ring",
            ("reduce_scatter", "ring"): "reducescatter:ring", ("broadcast", "ring"): "broadcast:ring"}
    want = {}
    for dim in out["mesh_dim_names"]:
        pair = (out["traffic"][dim]["op"], out["algorithms"][dim]["step"])
        if pair in nccl:
            want[dim] = {"NCCL_ALGO": nccl[pair]}
    assert want and out["nccl_hints"] == want
    assert out["nccl_hints_enabled"] is False
    monkeypatch.setenv("TORCH_TOPO_NCCL_HINTS", "1")
    assert main(["plan", str(DGX1), "--hosts", "2", "--mesh", "dp=2,tp=8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nccl_hints_enabled"] is True
    assert main(["plan", str(DGX1), "--hosts", "2", "--mesh", "dp=2,tp=8"]) == 0
    text = capsys.readouterr().out
    assert f"nccl hints: {want['tp']}" in text and "applied by init_device_mesh" in text


@pytest.mark.parametrize("verb", ["plan", "doctor"])
@pytest.mark.parametrize("argv,fragment", [
    (["--mesh", "dp=4,tp=4294967298"],
     "--mesh: dimension 'tp': size got 4294967298, expected an int >= 1 and <= 16384"),
    (["--mesh", "dp=8", "--hosts", "99999999999"], "--hosts: got 99999999999, expected >= 1 and <= 16384"),
    (["--mesh", "dp=8", "--hosts", "100000"], "--hosts: got 100000, expected >= 1 and <= 16384"),
    # 8 GPUs a host: 2049 hosts pass the bound on hosts but not the one on ranks.
    (["--mesh", "dp=8", "--hosts", "2049"], ": hosts: got 2049 hosts x 8 ranks of"),
])
def test_huge_sizes_are_refused_by_name(verb, argv, fragment, capsys):
    assert main([verb, str(DGX1)] + argv) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err


def test_rank_bound_is_exact():
    # MAX_RANKS ranks load; one host more does not (8 GPUs a host).
    assert MAX_RANKS == 16384
    assert len(json.loads(_C.planner_cluster_json(path=str(DGX1), hosts=2048))["ranks"]) == 16384
    with pytest.raises(ValueError, match="expected at most 16384 ranks in all"):
        _C.planner_cluster_json(path=str(DGX1), hosts=2049)
    with pytest.raises(ValueError, match=r"^mesh: dimension 'tp': size got 4294967298"):
        plan(DGX1, {"dp": 4, "tp": 2**32 + 2})
    with pytest.raises(ValueError, match=r"^hosts: got 20000, expected >= 1 and <= 16384"):
        plan(DGX1, {"dp": 8}, hosts=20000)
    # The bound on ranks names the Python argument, as the one on hosts does.
    with pytest.raises(ValueError, match=r"hosts: got 2049 hosts x 8 ranks of .*, expected at "
                                         r"most 16384 ranks in all"):
        plan(DGX1, {"dp": 8 * 2049}, hosts=2049)


def test_attention_bytes_past_int64_are_refused(capsys):
    # 24 bytes per element (Q, K, V in fp64) must fit in int64: the bound is accepted, past it not.
    bound = ((1 << 63) - 1) // 24
    shape = "heads=8,kv_heads=8,head_dim=128,dtype=float64,seq_len="
    seq_len = bound // (8 * 128) // 16 * 16
    assert main(["plan", str(DGX1), "--mesh", "sp=8", "--attention", shape + str(seq_len), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert all(c["seconds"] is None or c["seconds"] > 0 for c in out["sequence_split"]["candidates"])
    huge = 9223372036854775808
    assert main(["plan", str(DGX1), "--mesh", "sp=8", "--attention",
                 f"heads=8,kv_heads=2,head_dim=128,seq_len={huge},dtype=bf16"]) == 2
    err = capsys.readouterr().err
    assert (f"--attention: AttentionShape: batch x seq_len x heads x head_dim = {huge * 8 * 128}, "
            f"expected <= {bound}") in err
    # The Python API refuses it too, before pybind11 could fail on the byte count.
    with pytest.raises(ValueError, match=rf"^AttentionShape: .* = {huge * 8 * 128}, expected <= {bound} "):
        AttentionShape(heads=8, kv_heads=2, head_dim=128, seq_len=huge)


@pytest.mark.parametrize("gbps", [5.0, 50.0])
def test_inter_host_gbps_reaches_file_plans_and_doctor(gbps, capsys, monkeypatch):
    # Reference: the same two hosts as a cluster document that carries the bandwidth itself.
    monkeypatch.delenv("TORCH_TOPO_INTER_HOST_GBPS", raising=False)
    doc = json.loads(_C.planner_cluster_json(path=str(DGX1), hosts=2))
    assumed = plan(doc, {"dp": 8, "tp": 2})
    expected = plan({**doc, "inter_host_bandwidth_gbps": gbps}, {"dp": 8, "tp": 2})
    assert assumed.cluster.network_assumed and not expected.cluster.network_assumed
    assert expected.cost("dp") != pytest.approx(assumed.cost("dp"), rel=0.05)
    assert expected.cost("tp") == pytest.approx(assumed.cost("tp"))

    monkeypatch.setenv("TORCH_TOPO_INTER_HOST_GBPS", str(gbps))
    assert main(["plan", str(DGX1), "--mesh", "dp=8,tp=2", "--hosts", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cost"]["dp"] == pytest.approx(expected.cost("dp"), rel=1e-12)
    assert out["total_cost"] == pytest.approx(expected.cost(), rel=1e-12)
    assert main(["plan", str(DGX1), "--mesh", "dp=8,tp=2", "--hosts", "2"]) == 0
    assert "assumed" not in capsys.readouterr().out
    assert main(["doctor", str(DGX1), "--hosts", "2", "--json"]) in (0, 1)
    codes = {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "nic-speed-assumed" not in codes
    monkeypatch.delenv("TORCH_TOPO_INTER_HOST_GBPS")
    assert main(["doctor", str(DGX1), "--hosts", "2", "--json"]) in (0, 1)
    assert "nic-speed-assumed" in {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}


@pytest.mark.parametrize("value, says", [
    ("-5", "TORCH_TOPO_INTER_HOST_LATENCY_US: TopoConfig.inter_host_latency_us: got -5.0, "
           "expected a finite number > 0 or None"),
    ("1ms", "TORCH_TOPO_INTER_HOST_LATENCY_US: got '1ms', expected a number"),
    ("2e6", "TORCH_TOPO_INTER_HOST_LATENCY_US: TopoConfig.inter_host_latency_us: got 2000000.0, "
            "expected >= 1e-06 and <= 1e+06 us"),
])
@pytest.mark.parametrize("verb", ["plan", "doctor"])
def test_bad_inter_host_latency_is_refused_by_name(verb, value, says, tmp_path, capsys,
                                                   monkeypatch):
    _, path = played_cpu_ranks(tmp_path, 3.0)
    monkeypatch.setenv("TORCH_TOPO_INTER_HOST_LATENCY_US", value)
    assert main([verb, str(path), "--mesh", "tp=4,dp=2"]) == 2
    assert says in capsys.readouterr().err
    from torch_topo.plan import resolve_cluster

    with pytest.raises(ValueError, match=r"^TopoConfig.inter_host_latency_us: got -5.0"):
        resolve_cluster(path, inter_host_latency_us=-5.0)


def test_the_environment_does_not_override_a_cluster_or_a_configured_group(monkeypatch):
    # A live cluster carries the bandwidth its group was configured with, and a group's config
    # wins over the environment: neither may be repriced at TORCH_TOPO_INTER_HOST_GBPS.
    from torch_topo.config import TopoConfig
    from torch_topo.mesh import _world_cluster
    from torch_topo.plan import resolve_cluster

    doc = json.loads(_C.planner_cluster_json(path=str(DGX1), hosts=2))
    mesh = {"dp": 8, "tp": 2}
    at = {g: plan({**doc, "inter_host_bandwidth_gbps": g}, mesh).cost("dp") for g in (5.0, 50.0)}
    assert at[5.0] != pytest.approx(at[50.0], rel=0.05)
    monkeypatch.setenv("TORCH_TOPO_INTER_HOST_GBPS", "5")
    carried = resolve_cluster({**doc, "inter_host_bandwidth_gbps": 50.0})
    assert plan(carried, mesh).cost("dp") == pytest.approx(at[50.0], rel=1e-12)
    configured = _world_cluster(TopoConfig(topology_file=str(DGX1), inter_host_gbps=50.0), 16)
    assert plan(configured, mesh).cost("dp") == pytest.approx(at[50.0], rel=1e-12)


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e19", "9223372036854775808"])
def test_traffic_past_int64_is_refused_by_name(value, capsys):
    assert main(["plan", str(DGX1), "--mesh", "dp=4,tp=2", "--traffic", f"tp={value},dp=2e8"]) == 2
    err = capsys.readouterr().err
    assert f"--traffic: dimension 'tp': got {float(value)!r} bytes, expected >= 0 and < 2**63" in err
    with pytest.raises(ValueError, match=r"^traffic: dimension 'tp': got .* bytes, expected >= 0"):
        plan(DGX1, {"dp": 4, "tp": 2}, {"tp": float(value), "dp": 2e8})
    with pytest.raises(ValueError, match=r"^traffic: dimension 'tp': got .* bytes, expected >= 0"):
        plan(DGX1, {"dp": 4, "tp": 2}).cluster.plan_mesh([("dp", 4), ("tp", 2)],
                                                         {"tp": (float(value), ""), "dp": (2e8, "")},
                                                         False)


def test_traffic_bound_is_exact(capsys):
    # The largest double below 2**63 is accepted, by the CLI as by the API.
    top = float(2**63 - 1024)
    assert main(["plan", str(DGX1), "--mesh", "dp=4,tp=2", "--traffic", f"tp={top!r},dp=2e8",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cost"]["tp"] > 0 and out["cost"]["tp"] != float("inf")
    assert out["cost"]["tp"] == pytest.approx(
        plan(DGX1, {"dp": 4, "tp": 2}, {"tp": top, "dp": 2e8}).cost("tp"))


@pytest.mark.parametrize("verb", ["plan", "doctor"])
def test_cluster_file_with_two_ranks_on_one_gpu_is_refused(verb, tmp_path, capsys):
    doc = json.loads(_C.planner_cluster_json(path=str(DGX1), hosts=2))
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(doc, indent=2))
    # The same GPU index on two hosts is the normal case (ranks 2 and 10).
    assert main([verb, str(path), "--mesh", "dp=8,tp=2"]) in (0, 1)
    capsys.readouterr()
    doc["ranks"][3]["local_gpu"] = doc["ranks"][2]["local_gpu"]
    path.write_text(json.dumps(doc, indent=2))
    assert main([verb, str(path), "--mesh", "dp=8,tp=2"]) == 2
    err = capsys.readouterr().err
    assert (f"{path}:{position(doc, 'ranks[3].local_gpu', indent=2)}: field ranks[3].local_gpu: "
            "ranks[2] and ranks[3] on host 0 both claim GPU 2, expected one rank per GPU") in err
    assert "Traceback" not in err


def _set(*keys, value):
    def apply(doc):
        for key in keys[:-1]:
            doc = doc[key]
        doc[keys[-1]] = value
    return apply


def _drop_host_of_rank_0(doc):
    del doc["ranks"][0]["host"]


# The field each error names, the place it points at: the value, or the object that lacks it.
CLUSTER_EDITS = [
    ("hosts[1].gpus[0].sm", "hosts[1].gpus[0].sm", _set("hosts", 1, "gpus", 0, "sm", value="x")),
    ("hosts[0].gpus[3].bus_id", "hosts[0].gpus[3].bus_id",
     _set("hosts", 0, "gpus", 3, "bus_id", value="GPU3")),
    ("(root).inter_host_latency_us", "inter_host_latency_us",
     _set("inter_host_latency_us", value=-1)),
    ("ranks[0].host", "ranks[0]", _drop_host_of_rank_0),
]


@pytest.mark.parametrize("field, at, edit", CLUSTER_EDITS, ids=[c[0] for c in CLUSTER_EDITS])
def test_cluster_file_field_errors_point_at_the_value(field, at, edit, tmp_path, capsys):
    doc = json.loads(_C.planner_cluster_json(path=str(DGX1), hosts=2))
    edit(doc)
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(doc, indent=2))
    assert main(["plan", str(path), "--mesh", "dp=8,tp=2"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:{position(doc, at, indent=2)}: field {field}: " in err, err


GB200_TRAY = DATA / "nvidia_smi_topo" / "PARTIAL_sglang11208_GB200_4xGPU_NV18_6xNIC_gpuNUMAid.txt"


def test_plan_nvlink_domain_hosts(capsys):
    # 4 trays of a GB200 rack: tp=8 spans two trays. In one NVLink domain its all-reduce runs
    # over NVLink; without, over the trays' NICs. The plan equals the library's on the same
    # cluster document with the domains written into it.
    argv = ["plan", str(GB200_TRAY), "--hosts", "4", "--mesh", "dp=2,tp=8", "--json"]
    assert main(argv + ["--nvlink-domain-hosts", "4"]) == 0
    domain = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    flat = json.loads(capsys.readouterr().out)
    doc = json.loads(_C.planner_cluster_json(path=str(GB200_TRAY), hosts=4))
    for host in doc["hosts"]:
        for gpu in host["gpus"]:
            gpu["nvlink_domain"] = "rack"
    assert domain["cost"]["tp"] == pytest.approx(plan(doc, {"dp": 2, "tp": 8}).cost("tp"), rel=1e-12)
    assert flat["cost"]["tp"] > 3 * domain["cost"]["tp"]
    # Two domains of two trays: each tp group fills one domain, and dp crosses them by NIC.
    assert main(argv + ["--nvlink-domain-hosts", "2"]) == 0
    halves = json.loads(capsys.readouterr().out)
    assert halves["cost"]["tp"] == pytest.approx(domain["cost"]["tp"], rel=1e-12)
    assert halves["cost"]["dp"] > 3 * domain["cost"]["dp"]
    assert all(len({r // 8 for r in g}) == 1 for g in halves["groups"]["tp"])
    assert main(argv[:-1] + ["--nvlink-domain-hosts", "2"]) == 0
    text = capsys.readouterr().out
    assert "tp: all_reduce 1024 MiB/step, 4 per host x 2 hosts of one NVLink domain," in text
    assert "dp: all_reduce 128 MiB/step, across hosts, " in text


def test_domain_pairs_are_nvlink_paths():
    from torch_topo.plan import resolve_cluster, with_nvlink_domains

    cluster = resolve_cluster(with_nvlink_domains(GB200_TRAY, 4, 2), 1)
    assert cluster.pair_path(0, 5) == ("NV", 18)  # two trays of one domain
    assert cluster.pair_path(0, 1) == ("NV", 18)  # one tray
    assert cluster.pair_path(0, 8) == ("NET", 0)  # two domains
    assert cluster.bandwidth(0, 5) == cluster.bandwidth(0, 1)


@pytest.mark.parametrize("domain_hosts", [None, 9, 12, 18, 36])
def test_doctor_nvlink_domain_hosts(domain_hosts, capsys, monkeypatch):
    # 18 GB200 trays with tp outermost: contiguous tp pairs rank r (tray r // 4) with r + 36
    # (tray r // 4 + 9). Reference: the pairs' paths on a cluster document with the domains
    # written in by hand. doctor must flag tp-crosses-hosts exactly when a pair is NET (no
    # domain, or two domains: 9 trays each, or 12 + 6 where K does not divide the hosts, as
    # plan takes it). When all 18 trays share one domain (K = 18, or K > hosts) the pairs are
    # NV18 as the planned ones inside a tray, but still nine trays apart: tp-crosses-numa.
    from torch_topo.plan import resolve_cluster

    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
    doc = json.loads(_C.planner_cluster_json(path=str(GB200_TRAY), hosts=18))
    if domain_hosts is not None:
        for h, host in enumerate(doc["hosts"]):
            for gpu in host["gpus"]:
                gpu["nvlink_domain"] = f"rack{h // domain_hosts}"
    cluster = resolve_cluster(doc, 1)
    paths = {cluster.pair_path(r, r + 36) for r in range(36)}
    assert paths <= {("NV", 18), ("NET", 0)}
    crossing = ("NET", 0) in paths
    assert crossing == (domain_hosts in (None, 9, 12))
    argv = ["doctor", str(GB200_TRAY), "--hosts", "18", "--mesh", "tp=2,dp=36", "--json"]
    if domain_hosts is not None:
        argv += ["--nvlink-domain-hosts", str(domain_hosts)]
    rc = main(argv)
    findings = json.loads(capsys.readouterr().out)["findings"]
    tp = [f for f in findings if f["code"].startswith("tp-")]
    # The tray's file is cut short (rows of GPU3 and the NICs): a reader warning in every run,
    # and no other problem beside the tp findings.
    assert rc == 1
    assert [f["code"] for f in findings if f["severity"] != "info" and f not in tp] == [
        "reader-warning"]
    assert [f["code"] for f in tp] == (["tp-crosses-hosts"] if crossing else ["tp-crosses-numa"])
    if not crossing:
        assert "(e.g. host 0 node " in tp[0]["message"] and ", host 9 node " in tp[0]["message"]
    if crossing:
        assert "[[0, 36], [1, 37]" in tp[0]["message"] and "slowest pair NET" in tp[0]["message"]
    # plan with the same flag prices the contiguous tp groups as the planned ones exactly then.
    assert main(["plan", *argv[1:], "--compare", "naive"]) == 0
    out = json.loads(capsys.readouterr().out)
    contiguous, planned = out["compare"]["naive"]["cost"]["tp"], out["cost"]["tp"]
    assert (contiguous > 10 * planned) if crossing else contiguous == pytest.approx(planned, rel=1e-12)


def test_doctor_nvlink_domain_hosts_keeps_the_per_host_checks(capsys, monkeypatch):
    from torch_topo.doctor import diagnose

    # The domains come as one cluster document; the odd-tp check still sees 8-GPU hosts.
    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
    argv = ["doctor", str(A100_SXM), "--hosts", "3", "--mesh", "dp=8,tp=3", "--json"]
    for extra in ([], ["--nvlink-domain-hosts", "3"]):
        assert main(argv + extra) == 1
        assert "odd-tp" in {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}
    with pytest.raises(ValueError, match=r"^nvlink_domain_hosts: got 0, expected an int >= 1"):
        diagnose(A100_SXM, {"dp": 24}, hosts=3, nvlink_domain_hosts=0, environ={})


@pytest.mark.parametrize("verb", ["plan", "doctor"])
@pytest.mark.parametrize("value", ["0", "-3", "16385"])
def test_nvlink_domain_hosts_refuses_bad_sizes(verb, value, capsys):
    argv = [verb, str(GB200_TRAY), "--hosts", "4", "--mesh", "dp=16",
            "--nvlink-domain-hosts", value]
    assert main(argv) == 2
    assert (f"--nvlink-domain-hosts: got {value}, expected an int >= 1 and <= {MAX_RANKS} (hosts "
            "per NVLink domain)") in capsys.readouterr().err


def test_plan_follows_the_nccl_release_named(tmp_path, capsys):
    # 4 x 8 H100 with a 400G NIC per GPU: NCCL 2.26's estimates take the ring for 256 MiB,
    # the newest releases' (a costlier NVLS tree hop, a new NVLS tree formula) the NVLS tree.
    from torch_topo.bench.nccl_tests import cluster_doc

    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(cluster_doc("nvidia_smi_topo/h100_8xSXM_NV18_2socket_mlengineering.txt",
                                           hosts=4, sm=90, nic_gbit=400, nics=8)))

    def at_256_mib(*version):
        assert main(["plan", str(path), "--mesh", "dp=32", "--traffic", "dp=4e6", *version]) == 0
        line = next(x for x in capsys.readouterr().out.splitlines() if "predicted all_reduce" in x)
        return line.split("256 MiB: flat ")[1].split()[0]

    assert at_256_mib("--nccl-version", "2.26.2") == "ring/Simple"
    assert at_256_mib() == "nvls_tree/Simple"



def test_plan_shows_what_the_reader_assumed_for_a_file_cut_short(tmp_path, capsys):
    # The DGX-1 file's header and its rows of GPU0-GPU3 only: the rows of GPU4-GPU7 and of the
    # NIC are gone, so pairs among GPU4-GPU7 come from no cell (read as SYS). The plan rests on
    # that: it must say so, as doctor does, and say nothing for the whole file.
    cut = tmp_path / "cut.txt"
    cut.write_text("".join(DGX1.read_text().splitlines(keepends=True)[:5]))
    assert main(["plan", str(cut), "--mesh", "dp=4,tp=2"]) == 0
    text = capsys.readouterr().out
    (line,) = [x for x in text.splitlines() if x.startswith("reader warning: ")]
    assert "rows missing (file cut short?): GPU4, GPU5, GPU6, GPU7, mlx5_0" in line
    assert main(["plan", str(cut), "--mesh", "dp=4,tp=2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["reader_warnings"] == [line.removeprefix("reader warning: ")]
    assert main(["plan", str(DGX1), "--mesh", "dp=4,tp=2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["reader_warnings"] == []


@pytest.mark.parametrize("extra", [[], ["--compare", "naive"],
                                   ["--attention", "heads=16,kv_heads=16,head_dim=64,seq_len=4096"],
                                   ["--nvlink-domain-hosts", "2"], ["--nccl-version", "2.26.2"]])
def test_plan_refuses_unequal_hosts_naming_the_file(extra, tmp_path, capsys, monkeypatch):
    # Two DGX-1 hosts, the second without its last rank: no device mesh tiles 8 + 7 ranks.
    # The planner's own refusal named no input; plan names the file (or the pin that gave it)
    # and the counts, read here off the document's ranks, and what it takes instead.
    doc = json.loads(_C.planner_cluster_json(path=str(DGX1), hosts=2))
    doc["ranks"].pop()
    counts = sorted({sum(r["host"] == h for r in doc["ranks"]) for h in range(2)})
    assert counts == [7, 8]
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(doc))
    mesh = "sp=15" if "--attention" in extra else "dp=15"
    tail = (f"its hosts hold different rank counts ({counts[0]} and {counts[1]}), expected the "
            "same count on every host: a device mesh is laid out in equal blocks per host; give "
            "a cluster whose hosts each hold the same number of ranks (`python -m torch_topo "
            "doctor` runs the checks that need no mesh on this one)")
    assert main(["plan", str(path), "--mesh", mesh, *extra]) == 2
    assert capsys.readouterr().err == f"torch_topo plan: error: FILE {path}: {tail}\n"
    monkeypatch.setenv("TORCH_TOPO_FILE", str(path))
    assert main(["plan", "--mesh", mesh, *extra]) == 2
    assert capsys.readouterr().err == (f"torch_topo plan: error: {path} (pinned by "
                                       f"TORCH_TOPO_FILE / NCCL_TOPO_FILE): {tail}\n")
