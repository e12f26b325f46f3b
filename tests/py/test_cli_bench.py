# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo bench`: the spawn path with 2 CPU ranks, the table and JSON formats
(busbw = algbw x the nccl-tests factor), the link checks against real topology files (a slow
NVLink pair, a PCIe link at half its width, a NIC at a tenth of its speed, an unknown width, a
network pinned by TORCH_TOPO_INTER_HOST_GBPS), the progress line, the exit codes and the input
refused before any rank starts (sizes past a tensor's, broken pinned files)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
import torch

from torch_topo import load_topology
from torch_topo.bench import LinkCheck, Progress, SweepConfig, link_findings
from torch_topo.bench.links import check_host_copy, check_inter_host, check_peer_copy
from torch_topo.cli import bench as bench_cli
from torch_topo.cli import main
from torch_topo.plan import resolve_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")
XML = os.path.join(DATA, "nccl_topo_xml")
H200_VM = os.path.join(XML, "h200_1xGPU_firecracker-vm_nccl2.28.9_topo_dump.xml")
H200_HGX = os.path.join(XML, "PARTIAL_ncclTests256_H200-HGX_baremetal_topo_dump_numa0.xml")
NDV4 = os.path.join(XML, "azure_ndv4_8xA100_topo.xml")
NCV4 = os.path.join(XML, "azure_ncv4_4xA100pcie_topo.xml")
P4D = os.path.join(XML, "aws_p4d.24xlarge_8xA100_topo.xml")
DGX1 = os.path.join(DATA, "nvidia_smi_topo", "dgx1like_8xV100-SXM2_hybridcube_1xEDR_oneflow.txt")
# 8 x H100 and 9 NICs, whose speeds nvidia-smi text never gives.
H100_SMI = os.path.join(DATA, "nvidia_smi_topo", "PARTIAL_nccl1453_8xH100_NV18_9xNIC.tsv.txt")

# nccl-tests' bus bandwidth factors (doc/PERFORMANCE.md), written out here as the reference.
NCCL_TESTS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
                     "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
                     "broadcast": lambda n: 1.0}
SIZES = [8, 64, 512]


def _run(launcher: list[str], *args: str, **env_extra: str) -> tuple[int, dict]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               **env_extra)
    for var in ("RANK", "WORLD_SIZE", "TORCH_TOPO_FILE", "NCCL_TOPO_FILE", "TORCH_TOPO_PLAY"):
        if var not in env_extra:
            env.pop(var, None)
    proc = subprocess.run([sys.executable, *launcher, "torch_topo", "bench", *args], env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def spawned(tmp_path_factory):
    """One real CLI run: 2 spawned CPU ranks, tiny sizes, the H200 VM dump pinned."""
    png = tmp_path_factory.mktemp("bench") / "busbw.png"
    code, result = _run(["-m"], "--procs", "2", "--min-bytes", "8", "--max-bytes", "512",
                        "--factor", "8", "--reps", "1", "--topology", H200_VM, "--json",
                        "--check", "--plot", str(png))
    assert code == 0
    return result, png


def test_spawn_two_cpu_ranks_json(spawned):
    result, png = spawned
    assert set(result) == {"schema", "world_size", "device", "inner_backend", "sweep", "hosts",
                           "collectives", "min_fraction", "links", "findings", "check"}
    assert result["schema"] == "torch-topo-bench/1"
    assert (result["world_size"], result["device"], result["inner_backend"]) == (2, "cpu", "gloo")
    assert result["sweep"]["sizes"] == SIZES and result["check"] is True
    # The pinned file is the expectation source; CPU ranks on one host measure no link.
    assert len(result["hosts"]) == 1 and result["hosts"][0]["ranks"] == [0, 1]
    assert result["hosts"][0]["source"].endswith(os.path.basename(H200_VM))
    assert result["links"] == [] and result["findings"] == []
    got = [(r["collective"], r["size"]) for r in result["collectives"]]
    assert got == [(c, s) for c in NCCL_TESTS_FACTOR for s in SIZES]
    for r in result["collectives"]:
        factor = NCCL_TESTS_FACTOR[r["collective"]](2)
        elem = torch.empty((), dtype=getattr(torch, r["type"])).element_size()
        # count as nccl-tests prints it: per rank for the ops that split the buffer
        per_rank = r["collective"] in ("all_gather", "reduce_scatter", "all_to_all")
        assert r["size"] == r["count"] * elem * (2 if per_rank else 1)
        assert r["ranks"] == 2 and r["inner"] == "gloo"
        for side in ("topo", "inner"):
            algbw = r["size"] / (r[f"{side}_time_us"] * 1e-6) / 1e9
            assert r[f"{side}_algbw_GBps"] == pytest.approx(algbw, rel=1e-12)
            assert r[f"{side}_busbw_GBps"] == pytest.approx(algbw * factor, rel=1e-12)
        assert r["ratio"] == pytest.approx(r["inner_time_us"] / r["topo_time_us"], rel=1e-12)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _parse_tables(text: str) -> dict[str, list[list[str]]]:
    tables, name = {}, None
    for line in text.splitlines():
        if line.startswith("# ") and ": " in line and "ranks" in line:
            name = line[2:].split(":")[0]
            tables[name] = []
        elif name and line.startswith("  ") and line.split()[0].isdigit():
            tables[name].append([c for c in line.split() if c != "|"])
    return tables


def test_table_parses_back_to_the_records(spawned):
    result, _ = spawned
    tables = _parse_tables(bench_cli.render_text(result, check=True))
    assert list(tables) == list(NCCL_TESTS_FACTOR)
    for name, rows in tables.items():
        records = [r for r in result["collectives"] if r["collective"] == name]
        assert len(rows) == len(records) == len(SIZES)
        for row, r in zip(rows, records, strict=True):
            size, count, dtype, redop = int(row[0]), int(row[1]), row[2], row[3]
            t_topo, alg_topo, bus_topo, t_inner, alg_inner, bus_inner, ratio = map(float, row[4:])
            assert (size, count, dtype, redop) == (r["size"], r["count"], r["type"], r["redop"])
            assert redop == ("sum" if name in ("all_reduce", "reduce_scatter") else "none")
            assert t_topo == pytest.approx(r["topo_time_us"], abs=0.051)
            assert t_inner == pytest.approx(r["inner_time_us"], abs=0.051)
            assert ratio == pytest.approx(r["ratio"], abs=0.0051)
            factor = NCCL_TESTS_FACTOR[name](2)
            # printed with 3 decimals: busbw and algbw x factor agree to the rounding
            assert bus_topo == pytest.approx(alg_topo * factor, abs=0.0015)
            assert bus_inner == pytest.approx(alg_inner * factor, abs=0.0015)
    assert "0 problem(s), 0 note(s)" in bench_cli.render_text(result, check=True)


def test_under_torchrun_uses_the_given_world():
    code, result = _run(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                         "-m"], "--collectives", "broadcast", "--max-bytes", "8", "--reps", "1",
                        "--json")
    assert code == 0 and result["world_size"] == 2 and result["hosts"][0]["ranks"] == [0, 1]
    assert [(r["collective"], r["size"], r["ranks"]) for r in result["collectives"]] == [
        ("broadcast", 8, 2)]


def test_played_hosts_check_inter_host_busbw():
    # Two CPU ranks play GPU 0 of two Azure NCv4 hosts (one 100 Gbit/s NIC each): Gloo on one
    # machine is far below what the cost model expects of those NICs, so --check exits 1.
    code, result = _run(["-m"], "--procs", "2", "--collectives", "all_reduce", "--min-bytes",
                        "64K", "--max-bytes", "64K", "--reps", "1", "--topology", NCV4, "--json",
                        "--check", TORCH_TOPO_PLAY="h0:0,h1:0")
    assert code == 1 and [h["hostname"] for h in result["hosts"]] == ["h0", "h1"]
    (check,) = result["links"]
    record = result["collectives"][0]
    assert check["kind"] == "inter_host" and check["subject"] == "all_reduce over 2 hosts"
    assert check["measured_gbps"] == max(record["topo_busbw_GBps"], record["inner_busbw_GBps"])
    # One 100 Gbit/s NIC per host caps a 2-rank all_reduce at 12.5 GB/s busbw; at 64 KiB the
    # model adds latency, but not so much that the NIC term vanishes.
    assert 0.25 * 12.5 < check["expected_gbps"] <= 12.5
    assert "host0 1 x 100 Gbit/s, host1 1 x 100 Gbit/s" in check["basis"]
    assert [f["code"] for f in result["findings"]] == ["inter-host-slow"]


def test_played_hosts_rated_by_the_pinned_network():
    # nvidia-smi text gives no NIC speed, so the check was unrated although
    # TORCH_TOPO_INTER_HOST_GBPS pinned the network for the cost model.
    code, result = _run(["-m"], "--procs", "2", "--collectives", "all_reduce", "--min-bytes",
                        "64K", "--max-bytes", "64K", "--reps", "1", "--topology", H100_SMI,
                        "--json", TORCH_TOPO_PLAY="h0:0,h1:0", TORCH_TOPO_INTER_HOST_GBPS="5")
    assert code == 0
    (check,) = result["links"]
    # The pin's 5 GB/s per host and direction is shared by the host's 9 NICs of unknown speed,
    # and a host's one rank drives one of them: a 2-rank all_reduce's busbw (factor 1) is at
    # most 5/9 GB/s; at 64 KiB the model adds latency, but not so much that the pin vanishes.
    assert 0.25 * 5 / 9 < check["expected_gbps"] <= 5 / 9
    assert "over TORCH_TOPO_INTER_HOST_GBPS=5 GB/s per host and NICs: host0 NIC speed " \
           "unknown" in check["basis"], check["basis"]
    assert "link-unrated" not in [f["code"] for f in result["findings"]]


def test_pinned_network_is_the_basis():
    # A pin under the NICs' speed caps the model, but the basis named the NICs alone.
    hosts = [load_topology(NCV4)] * 2
    planner = resolve_cluster(NCV4, hosts=2, model="alpha_beta", inter_host_gbps=0.05)
    check = check_inter_host(planner, hosts, "all_reduce", 1 << 30, 1.0, pinned_gbps=0.05)
    # busbw <= the host's 0.05 GB/s x 2(n-1)/n over n = 8 ranks; 1 GiB leaves latency out.
    bound = 0.05 * NCCL_TESTS_FACTOR["all_reduce"](8)
    assert 0.9 * bound <= check.expected_gbps <= bound
    assert check.basis.endswith("over TORCH_TOPO_INTER_HOST_GBPS=0.05 GB/s per host and NICs: "
                                "host0 1 x 100 Gbit/s, host1 1 x 100 Gbit/s"), check.basis
    # Pinned, unknown NIC speeds no longer leave the figure unrated.
    smi = [load_topology(H100_SMI)] * 2
    pinned = check_inter_host(resolve_cluster(H100_SMI, hosts=2, model="alpha_beta",
                                              inter_host_gbps=5.0),
                              smi, "all_reduce", 1 << 30, 1.0, pinned_gbps=5.0)
    bound = 5.0 * NCCL_TESTS_FACTOR["all_reduce"](16)
    assert 0.5 * bound <= pinned.expected_gbps <= bound
    assert [f.code for f in link_findings([pinned])] == ["inter-host-slow"]


def test_inter_host_check_without_all_reduce_says_what_stands_in():
    # docs/bench.md promised the all_reduce figure; without all_reduce the first collective
    # swept was checked under the same words.
    from types import SimpleNamespace

    from torch_topo.bench.launch import _checks

    def record(name, size, busbw):
        return {"collective": name, "size": size, "topo_busbw_GBps": busbw,
                "inner_busbw_GBps": busbw / 2}

    cluster = SimpleNamespace(hosts=[load_topology(NCV4)] * 2, configured_inter_host_gbps=0.0)
    planner = resolve_cluster(NCV4, hosts=2, model="alpha_beta")
    records = [record("broadcast", 1 << 20, 3.0), record("broadcast", 1 << 30, 4.0),
               record("all_gather", 1 << 30, 5.0)]
    (check,) = _checks(cluster, planner, [], records)
    assert (check.subject, check.measured_gbps) == ("broadcast over 2 hosts", 4.0)
    # Everything a broadcast sends to the other host crosses its one 100 Gbit/s NIC.
    assert 0.5 * 12.5 <= check.expected_gbps <= 12.5
    assert check.basis.endswith("; broadcast in place of all_reduce, which was not swept")
    (check,) = _checks(cluster, planner, [], [*records, record("all_reduce", 1 << 30, 6.0)])
    assert check.subject == "all_reduce over 2 hosts" and "in place of" not in check.basis


def test_slow_nvlink_pair():
    # H200 HGX: NV18 between every pair; sm90 NVLink4 is 20.6 GB/s per lane (NCCL SM90_NVLINK_BW).
    topo = load_topology(H200_HGX)
    slow = check_peer_copy(topo, 0, 1, 0.5 * 18 * 20.6)
    fine = check_peer_copy(topo, 0, 2, 0.95 * 18 * 20.6)
    assert slow.expected_gbps == pytest.approx(18 * 20.6) and slow.link == "NV18"
    (finding,) = link_findings([slow, fine])
    assert (finding.code, finding.severity) == ("p2p-slow", "warning")
    assert finding.message.startswith("host0 GPU0-GPU1: peer-to-peer copy: got")
    assert "NV18: 18 NVLinks" in finding.message
    assert "nvidia-smi nvlink --status" in finding.fix
    # DGX-1 hybrid cube mesh: the same 25 GB/s is fine on an NV1 pair, slow on an NV2 pair.
    dgx1 = load_topology(DGX1)
    assert (dgx1.nvlinks(0, 1), dgx1.nvlinks(0, 3)) == (1, 2)
    checks = [check_peer_copy(dgx1, 0, 1, 25.0), check_peer_copy(dgx1, 0, 3, 25.0)]
    assert [f.message.split(":")[0] for f in link_findings(checks)] == ["host0 GPU0-GPU3"]


def test_pcie_link_at_half_width():
    # Azure NDv4: every GPU on a Gen4 x16 link, 16 x 1.5 GB/s usable (NCCL kvDictPciGen).
    planner = resolve_cluster(NDV4)
    checks = [check_host_copy(planner, 0, gpu, kind, 12.0 if gpu == 2 else 23.5)
              for gpu in range(8) for kind in ("h2d", "d2h")]
    assert all(c.expected_gbps == pytest.approx(16 * 1.5) for c in checks)
    findings = link_findings(checks)
    assert [(f.code, f.message.split(":")[0]) for f in findings] == [
        ("h2d-slow", "host0 GPU2"), ("d2h-slow", "host0 GPU2")]
    assert "x16" in findings[0].message and "expected >= 16.80 GB/s" in findings[0].message
    assert "LnkSta" in findings[0].fix
    # The threshold is the stated fraction: 12 of 24 GB/s passes at 0.5, not at 0.51.
    assert link_findings(checks, 0.5) == [] and len(link_findings(checks, 0.51)) == 2


def test_unknown_pcie_width_is_a_finding():
    # The H200 VM's NCCL dump: link_width="0" at 32 GT/s (Gen5), rated as x16 = 16 x 3 GB/s.
    planner = resolve_cluster(H200_VM)
    checks = [check_host_copy(planner, 0, 0, "h2d", 52.0), check_host_copy(planner, 0, 0, "d2h", 50.0)]
    assert checks[0].expected_gbps == pytest.approx(16 * 3.0)
    assert checks[0].link == "PCIe-unknown-width"
    (finding,) = link_findings(checks)  # once per GPU, and no slow-copy finding at 1.04-1.08x
    assert (finding.code, finding.severity) == ("pcie-width-unknown", "warning")
    assert finding.message.startswith("host0 GPU0:") and "48.0 GB/s" in finding.message
    # A copy at a quarter of the assumed rate is slow as well.
    slow = link_findings([check_host_copy(planner, 0, 0, "h2d", 12.0)])
    assert [f.code for f in slow] == ["pcie-width-unknown", "h2d-slow"]


def test_nic_at_a_tenth_of_its_speed():
    # Azure NCv4 x 2 hosts: one 100 Gbit/s NIC per host. An all_reduce must move S bytes
    # through each host's NIC (2(H-1)/H x S for H = 2), so algbw <= 12.5 GB/s and
    # busbw <= 12.5 x 2(n-1)/n with n = 8 ranks.
    planner = resolve_cluster(NCV4, hosts=2, model="alpha_beta")  # the links, as launch prices them
    hosts = [load_topology(NCV4)] * 2
    bound = 100 / 8 * NCCL_TESTS_FACTOR["all_reduce"](8)
    fine = check_inter_host(planner, hosts, "all_reduce", 1 << 30, 0.95 * bound)
    assert 0.9 * bound <= fine.expected_gbps <= bound
    assert "1 x 100 Gbit/s" in fine.basis and link_findings([fine]) == []
    tenth = check_inter_host(planner, hosts, "all_reduce", 1 << 30, bound / 10)
    (finding,) = link_findings([tenth])
    assert (finding.code, finding.severity) == ("inter-host-slow", "warning")
    assert finding.message.startswith("all_reduce over 2 hosts: inter-host bus bandwidth: got")
    assert "ibstat" in finding.fix
    # NICs of unknown speed: nothing to hold the figure against, reported as a note only.
    unknown = check_inter_host(resolve_cluster(P4D, hosts=2), [load_topology(P4D)] * 2,
                               "all_reduce", 1 << 30, 1.0)
    assert unknown.expected_gbps is None
    assert [(f.code, f.severity) for f in link_findings([unknown])] == [("link-unrated", "info")]


def test_measured_gpu_figures_meet_their_links():
    # What the host leader's copies turn into (CUDA indices -> the file's GPUs), on CPU.
    from types import SimpleNamespace

    from torch_topo.bench.launch import _checks

    topo = load_topology(NDV4)
    measured = [("h2d", 0, 2, 12.0), ("d2h", 0, 2, 23.0), ("p2p", 0, 0, 1, 20.0),
                ("p2p", 0, 0, 9, 1.0)]
    checks = _checks(SimpleNamespace(hosts=[topo]), resolve_cluster(NDV4), measured, [])
    assert [(c.kind, c.subject) for c in checks] == [
        ("h2d", "host0 GPU2"), ("d2h", "host0 GPU2"), ("p2p", "host0 GPU0-GPU1"),
        ("p2p", "host0 GPU0-GPU9")]
    assert [c.expected_gbps for c in checks[:2]] == [pytest.approx(24.0)] * 2
    assert checks[2].expected_gbps == pytest.approx(topo.bandwidth(0, 1))
    assert checks[3].expected_gbps is None and "not in" in checks[3].basis
    assert [f.code for f in link_findings(checks)] == ["h2d-slow", "link-unrated"]


def test_topology_without_pcie_graph_is_unrated():
    check = check_host_copy(resolve_cluster(DGX1), 0, 0, "h2d", 11.0)
    assert check.expected_gbps is None and check.fraction is None
    assert [f.severity for f in link_findings([check])] == ["info"]


def test_progress_line_only_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        p = Progress(2, stream=stream, min_interval_s=0.0)
        p("all_reduce 8 B")
        p("all_reduce 64 B")
        p.close()
    assert "\rbench: 1/2 all_reduce 8 B" in tty.getvalue()
    assert "bench: 2/2 all_reduce 64 B" in tty.getvalue() and tty.getvalue().endswith("\r")
    assert pipe.getvalue() == ""


def _result_with(checks: list[LinkCheck]) -> dict:
    return {"collectives": [], "sweep": {"reps": 1}, "min_fraction": 0.7,
            "links": [c.to_dict() for c in checks],
            "findings": [f.to_dict() for f in link_findings(checks)]}


def test_exit_codes(monkeypatch, capsys):
    planner = resolve_cluster(NDV4)
    slow = _result_with([check_host_copy(planner, 0, 0, "h2d", 12.0)])
    monkeypatch.setattr(bench_cli, "run_bench", lambda options, procs: slow)
    assert main(["bench", "--procs", "2"]) == 0  # findings are reported, exit 1 only with --check
    assert main(["bench", "--procs", "2", "--check"]) == 1
    out = capsys.readouterr().out
    assert "[warning] h2d-slow: host0 GPU0: host-to-device copy: got 12.00 GB/s" in out
    assert "1 problem(s), 0 note(s)" in out
    assert main(["bench", "--procs", "2", "--check", "--json"]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [set(f) for f in findings] == [{"code", "severity", "message", "fix"}]
    notes = _result_with([check_host_copy(resolve_cluster(DGX1), 0, 0, "h2d", 11.0)])
    monkeypatch.setattr(bench_cli, "run_bench", lambda options, procs: notes)
    assert main(["bench", "--procs", "2", "--check"]) == 0  # info only


@pytest.mark.parametrize("argv, message", [
    (["--procs", "0"], "--procs: got 0, expected >= 1"),
    (["--procs", "2", "--min-bytes", "lots"], "--min-bytes: got 'lots'"),
    (["--procs", "2", "--min-bytes", "1M", "--max-bytes", "1K"],
     "--min-bytes/--max-bytes: got 1048576/1024, expected --min-bytes <= --max-bytes"),
    (["--procs", "2", "--factor", "1"], "--factor: got 1, expected >= 2"),
    (["--procs", "2", "--min-fraction", "1.5"], "--min-fraction: got 1.5"),
    (["--procs", "2", "--collectives", "all_reduce", "gather"], "invalid choice: 'gather'"),
    (["--procs", "2", "--topology", "/nonexistent/topo.xml"],
     "--topology: cannot open '/nonexistent/topo.xml'"),
])
def test_bad_input_exits_2(argv, message, capsys):
    assert main(["bench", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    # int(inf) raised OverflowError: a traceback, exit 1.
    (["--max-bytes", "infK"], "--max-bytes: got 'infK', expected at most 9223372036854775807 "
                              "bytes"),
    (["--max-bytes", "1e400K"], "--max-bytes: got '1e400K', expected at most "
                                "9223372036854775807 bytes"),
    # Taken: every rank died on torch.ones of more than 2^63 elements, a TypeError each.
    (["--min-bytes", "1e12G", "--max-bytes", "1e12G"], "--min-bytes: got '1e12G', expected at "
                                                       "most 9223372036854775807 bytes"),
    (["--max-bytes", "nanK"], "--max-bytes: got 'nanK', expected bytes like 8, 64K, 16M"),
])
def test_sizes_past_a_tensor_exit_2_before_spawning(argv, message, monkeypatch, capsys):
    def sweep(options, procs):
        raise AssertionError(f"spawned {procs} ranks")

    monkeypatch.setattr(bench_cli, "run_bench", sweep)
    assert main(["bench", "--procs", "2", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"torch_topo bench: error: argument {message}") \
        and err.count("\n") == 1, err


def test_sizes_end_at_the_largest_tensor(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(bench_cli, "run_bench",
                        lambda options, procs: seen.append(options) or _result_with([]))
    assert main(["bench", "--procs", "2", "--max-bytes", str(2**63)]) == 2
    assert f"--max-bytes: got '{2**63}', expected at most 9223372036854775807 bytes" \
        in capsys.readouterr().err
    assert main(["bench", "--procs", "2", "--min-bytes", str(2**63 - 1), "--max-bytes",
                 str(2**63 - 1)]) == 0
    assert [options.sweep.sizes for options in seen] == [(2**63 - 1,)]


@pytest.fixture
def broken_files(tmp_path):
    with open(NCV4, "rb") as f:
        xml = f.read()
    cut = tmp_path / "cut.xml"
    cut.write_bytes(xml[:xml.index(b"<pci") + 10])
    latin = tmp_path / "latin.xml"
    latin.write_bytes(xml.replace(b"x86_64", b"x86\xff64", 1))
    return cut, latin


@pytest.mark.parametrize("variable, which", [
    ("TORCH_TOPO_FILE", "cut"), ("NCCL_TOPO_FILE", "latin"), ("TORCH_TOPO_FILE", "missing"),
    ("NCCL_TOPO_FILE", "missing")])
def test_broken_pinned_file_exits_2_before_spawning(variable, which, broken_files, tmp_path,
                                                    monkeypatch, capsys):
    # Each spawned rank failed on it with a traceback, then the run ended "rank 0 failed".
    def sweep(options, procs):
        raise AssertionError(f"spawned {procs} ranks")

    path = {"cut": broken_files[0], "latin": broken_files[1],
            "missing": tmp_path / "gone.xml"}[which]
    if which == "missing":
        setting = ("TopoConfig.topology_file (or TORCH_TOPO_FILE)"
                   if variable == "TORCH_TOPO_FILE" else variable)
        message = f"{setting}: got '{path}', expected an existing topology file"
    else:
        with pytest.raises(ValueError) as refused:  # the reader's own words for the file
            load_topology(path)
        message = str(refused.value)
    monkeypatch.delenv("TORCH_TOPO_FILE", raising=False)
    monkeypatch.delenv("NCCL_TOPO_FILE", raising=False)
    monkeypatch.setenv(variable, str(path))
    monkeypatch.setattr(bench_cli, "run_bench", sweep)
    assert main(["bench", "--procs", "2"]) == 2
    assert capsys.readouterr().err == f"torch_topo bench: error: {message}\n"
    # --topology is what the ranks get pinned then: the variable's file is not read.
    monkeypatch.setattr(bench_cli, "run_bench", lambda options, procs: _result_with([]))
    assert main(["bench", "--procs", "2", "--topology", NCV4]) == 0


@pytest.mark.parametrize("where, message", [
    ("missing/busbw.png", "--plot: no folder '{tmp}/missing' to write"),
    ("", "--plot: '{tmp}/' is a folder"),
    # Matplotlib refused it after the sweep, with a message that named no option.
    ("busbw.txt", "--plot: cannot write a 'txt' file '{tmp}/busbw.txt'; expected one of"),
    # Written as '{tmp}/busbw.png', not the name given.
    ("busbw", "--plot: '{tmp}/busbw' names no file type; expected a name ending in one of"),
])
def test_bad_plot_path_exits_2_before_the_sweep(where, message, tmp_path, monkeypatch, capsys):
    # It failed after the sweep (minutes on GPUs), and the tables were never printed.
    def sweep(options, procs):
        raise AssertionError("the sweep ran")

    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setattr(bench_cli, "run_bench", sweep)
    assert main(["bench", "--procs", "2", "--plot", f"{tmp_path}/{where}"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert message.format(tmp=tmp_path) in err, err


def test_plot_without_matplotlib_exits_2_before_the_sweep(tmp_path, monkeypatch, capsys):
    # matplotlib is no dependency of the package: its ImportError came after the sweep, as a
    # traceback.
    def sweep(options, procs):
        raise AssertionError("the sweep ran")

    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setattr(bench_cli, "run_bench", sweep)
    monkeypatch.setitem(sys.modules, "matplotlib.backend_bases", None)  # import fails
    assert main(["bench", "--procs", "2", "--plot", str(tmp_path / "busbw.png")]) == 2
    assert capsys.readouterr().err == "torch_topo bench: error: --plot: needs matplotlib, " \
                                      "which is not installed (pip install matplotlib)\n"


def test_figure_that_cannot_be_written_keeps_the_tables(monkeypatch, capsys):
    # The OS's "[Errno 2] No such file or directory" named no option, and the tables of the
    # sweep were never printed. /proc takes no new files, root or not.
    monkeypatch.delenv("RANK", raising=False)
    row = {"collective": "all_reduce", "size": 8, "count": 2, "type": "float32", "redop": "sum",
           "ranks": 2, "inner": "gloo", "topo_time_us": 10.0, "inner_time_us": 20.0,
           "topo_algbw_GBps": 0.0008, "inner_algbw_GBps": 0.0004, "topo_busbw_GBps": 0.0008,
           "inner_busbw_GBps": 0.0004, "ratio": 2.0, "overhead_us": -10.0}
    monkeypatch.setattr(bench_cli, "run_bench",
                        lambda options, procs: {**_result_with([]), "collectives": [row]})
    assert main(["bench", "--procs", "2", "--plot", "/proc/busbw.png"]) == 2
    out, err = capsys.readouterr()
    assert out.splitlines()[2].split()[:6] == ["8", "2", "float32", "sum", "|", "10.0"], out
    assert err == "torch_topo bench: error: --plot: cannot write '/proc/busbw.png': " \
                  "No such file or directory\n", err


def test_more_ranks_than_the_planner_takes_exits_2_before_spawning(monkeypatch, capsys):
    # 100000 was taken: the bench started spawning processes until the machine gave out.
    def sweep(options, procs):
        raise AssertionError(f"spawned {procs} ranks")

    monkeypatch.setattr(bench_cli, "run_bench", sweep)
    assert main(["bench", "--procs", "4097"]) == 2
    assert capsys.readouterr().err == "torch_topo bench: error: --procs: got 4097, expected at " \
                                      "most 4096 (processes started at once on this machine)\n"


def test_sweep_defaults_are_the_documented_ones(monkeypatch):
    # docs/bench.md, Options: all five collectives, 8 B to 16M, factor 4, 5 reps, float32, 0.7.
    seen = []
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setattr(bench_cli, "run_bench",
                        lambda options, procs: seen.append(options) or _result_with([]))
    assert main(["bench", "--procs", "2"]) == 0
    assert seen[0].sweep == SweepConfig(
        collectives=("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"),
        min_bytes=8, max_bytes=16 * 2**20, factor=4, reps=5, dtype="float32")
    assert seen[0].min_fraction == 0.7


@pytest.mark.parametrize("option", [["--collectives", "all_reduce"], ["--reps", "3"],
                                    ["--min-bytes", "1K"], ["--min-fraction", "0.5"]])
def test_sweep_options_are_refused_with_published(option, capsys):
    # They were taken and ignored (exit 0), while --procs, --check and --plot were refused.
    published = os.path.join(DATA, "nccl_tests", "xxrjunNcclTestsCluster_H100_N2_G8_nccl22902_"
                             "alltoall_perf_4G-16G.txt")
    host = os.path.join(DATA, "nvidia_smi_topo", "h100_8xSXM_NV18_2socket_mlengineering.txt")
    assert main(["bench", "--published", published, "--topology", host, "--nic-gbit", "400",
                 "--nics", "8", *option]) == 2
    assert capsys.readouterr().err == f"torch_topo bench: error: {option[0]}: measures this " \
                                      "machine, not a saved output; leave it out with --published\n"


@pytest.mark.parametrize("play, message", [
    ("garbage", "entry 'garbage': expected HOST:GPU with GPU an integer >= 0"),
    ("h0:0,h1:0,h2:0", "3 entries"),
])
def test_bad_play_exits_2_before_spawning(play, message, monkeypatch, capsys):
    # Each spawned rank failed on it with a traceback, then the run ended "rank 0 failed".
    def sweep(options, procs):
        raise AssertionError(f"spawned {procs} ranks")

    monkeypatch.setattr(bench_cli, "run_bench", sweep)
    monkeypatch.setenv("TORCH_TOPO_PLAY", play)
    assert main(["bench", "--procs", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("torch_topo bench: error: TopoConfig.play (TORCH_TOPO_PLAY): ") \
        and message in err and err.count("\n") == 1, err


def test_launch_errors_exit_2(monkeypatch, capsys):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["bench"]) == 2
    assert "no CUDA device here: pass --procs N" in capsys.readouterr().err
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert main(["bench", "--procs", "2"]) == 2
    assert "--procs: the launcher already gave WORLD_SIZE=4" in capsys.readouterr().err


def test_every_side_takes_every_place_in_turn():
    from torch_topo.bench.sweep import alternating, rotated

    sides = ["topo", "gloo", "control"]
    orders = [rotated(rep, sides) for rep in range(3)]
    for place in range(3):
        assert sorted(order[place] for order in orders) == sorted(sides)
    assert orders[0] == sides and rotated(3, sides) == sides
    assert [alternating(rep, "a", "b") for rep in range(3)] == [("a", "b"), ("b", "a"), ("a", "b")]
