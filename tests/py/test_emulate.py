# SPDX-License-Identifier: Apache-2.0
"""The emulated cluster (torch_topo.emulate): collectives across emulated nodes against local
references, host names, rank placement, link shaping, cleanup on every exit path, refusal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from torch_topo import emulate
from torch_topo.config import TopoConfig
from torch_topo.emulation import netns
from torch_topo.emulation.launcher import place_ranks
from torch_topo.emulation.shaping import LinkSpec, parse_delay_us, parse_rate_bps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(ROOT, "tests", "py", "emulated_worker.py")
LINKCHECK = os.path.join(ROOT, "torch_topo", "emulation", "linkcheck.py")

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="the emulator needs root (network namespaces)"
)


def _host_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip() for line in out.splitlines()}


def _assert_clean(pid: int, links_before: set[str]) -> None:
    left = [ns for ns in netns.list_namespaces() if ns.startswith(f"{netns.NS_PREFIX}{pid}-")]
    assert left == []
    etc = os.listdir("/etc/netns") if os.path.isdir("/etc/netns") else []
    assert [d for d in etc if d.startswith(f"{netns.NS_PREFIX}{pid}-")] == []
    assert _host_links() == links_before


def _run_here(args: list[str]) -> int:
    """Runs the emulator in this process (torch is already imported: saves a start-up) and
    checks that it left nothing behind."""
    links_before = _host_links()
    rc = emulate.main(args)
    _assert_clean(os.getpid(), links_before)
    return rc


def _records(out_dir, world: int) -> list[dict]:
    return [json.load(open(os.path.join(out_dir, f"rank{r}.json"))) for r in range(world)]


@needs_root
@pytest.mark.timeout(240)
@pytest.mark.parametrize("nodes,ppn,placement", [(2, 2, "contiguous"), (3, 2, "interleaved")])
def test_collectives_match_references(tmp_path, capfd, nodes, ppn, placement):
    rc = _run_here(["--nodes", str(nodes), "--procs-per-node", str(ppn), "--placement",
                    placement, "--timeout-s", "200", "--",
                    sys.executable, WORKER, "--out", str(tmp_path)])
    assert rc == 0, capfd.readouterr().err[-3000:]
    records = _records(tmp_path, nodes * ppn)
    for spec, rec in zip(place_ranks(nodes, ppn, placement), records, strict=True):
        assert "exception" not in rec, rec["exception"]
        assert rec["hostname"] == f"node{spec.node}"
        assert (rec["node"], rec["local_rank"]) == (spec.node, spec.local_rank)
        assert rec["gloo_mismatches"] == []
        if rec["topo_unavailable"]:
            continue
        assert rec["topo_mismatches"] == []
    if any(rec["topo_unavailable"] for rec in records):
        pytest.skip(f"gloo checked; topo part not run: {records[0]['topo_unavailable']}")


@needs_root
@pytest.mark.timeout(120)
def test_killed_rank_fails_the_others_quickly(tmp_path, capfd):
    timeout_s = 20
    rc = _run_here(["--nodes", "2", "--procs-per-node", "1", "--grace-s", "60", "--",
                    sys.executable, WORKER, "--out", str(tmp_path), "--kill-rank", "1",
                    "--timeout-s", str(timeout_s)])
    err = capfd.readouterr().err
    assert rc == 128 + signal.SIGKILL, err[-2000:]
    assert "rank 1 failed with exit code 137" in err
    survivor = json.load(open(tmp_path / "rank0.json"))
    assert survivor["error"], survivor
    assert survivor["error_after_s"] < timeout_s + 5
    assert not (tmp_path / "rank1.json").exists()


_ENV_PROBE = (
    "import json, os, socket, sys; "
    "keys = ['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'NODE_RANK', "
    "'MASTER_ADDR', 'MASTER_PORT', 'TORCH_TOPO_FILE', 'EMULATED_CLUSTER_FILE']; "
    "rec = {k: os.environ[k] for k in keys}; rec['hostname'] = socket.gethostname(); "
    "rec['latency'] = os.environ.get('TORCH_TOPO_INTER_HOST_LATENCY_US'); "
    "rec['host'] = json.load(open(os.environ['TORCH_TOPO_FILE'])); "
    "rec['cluster'] = json.load(open(os.environ['EMULATED_CLUSTER_FILE'])); "
    "json.dump(rec, open(os.path.join(sys.argv[1], 'rank%s.json' % os.environ['RANK']), 'w'))"
)


@needs_root
@pytest.mark.timeout(60)
def test_environment_placement_and_cluster_file(tmp_path):
    rc = _run_here(["--nodes", "3", "--procs-per-node", "2", "--placement", "interleaved",
                    "--inter-bw", "500mbit", "--inter-delay", "2ms", "--",
                    sys.executable, "-c", _ENV_PROBE, str(tmp_path)])
    assert rc == 0
    recs = _records(tmp_path, 6)
    for r, rec in enumerate(recs):
        # Interleaved by hand: rank r on node r % 3, local rank r // 3.
        assert rec["hostname"] == f"node{r % 3}"
        assert (rec["RANK"], rec["WORLD_SIZE"], rec["LOCAL_RANK"], rec["LOCAL_WORLD_SIZE"],
                rec["NODE_RANK"]) == (str(r), "6", str(r // 3), "2", str(r % 3))
        assert rec["MASTER_ADDR"] == "10.213.0.1"
        assert (rec["host"]["schema"], rec["host"]["kind"]) == ("torch-topo/1", "host")
        assert rec["host"]["hostname"] == f"node{r % 3}"
        assert rec["host"]["nics"] == [{"name": "eth0", "bus_id": "", "numa_node": -1,
                                        "speed_gbps": 0.5}]  # Gbit/s
        cluster = rec["cluster"]
        assert (cluster["schema"], cluster["kind"]) == ("torch-topo/1", "cluster")
        assert cluster["ranks"][r] == {"host": r % 3, "local_rank": r // 3, "local_gpu": -1}
        assert cluster["inter_host_bandwidth_gbps"] == pytest.approx(500e6 / 8 / 1e9)
        assert cluster["inter_host_latency_us"] == pytest.approx(2000)
        # The backend is told the latency as a user would pin it (the host file has no field).
        pinned = TopoConfig.from_env({"TORCH_TOPO_INTER_HOST_LATENCY_US": rec["latency"]})
        assert pinned.inter_host_latency_us == pytest.approx(2000)
    assert [h["hostname"] for h in recs[0]["cluster"]["hosts"]] == ["node0", "node1", "node2"]
    # The project's own readers take both files, and the cluster the backend assembles from the
    # ranks' pinned host files has the emulated link speed (500 Mbit/s = 0.0625 GB/s).
    from torch_topo import _C

    parsed = json.loads(_C.planner_cluster_json(text=json.dumps(recs[0]["cluster"])))
    assert parsed["inter_host_bandwidth_gbps"] == pytest.approx(0.0625)
    assert parsed["inter_host_latency_us"] == pytest.approx(2000)
    records = [_C.RankRecord(r, rec["hostname"], int(rec["LOCAL_RANK"]), -1,
                             json.dumps(rec["host"])) for r, rec in enumerate(recs)]
    assembled = _C.assemble_cluster(records)
    assert assembled.inter_host_bandwidth_gbps == pytest.approx(0.0625)


@needs_root
@pytest.mark.timeout(60)
def test_nodes_play_a_host_topology_file(tmp_path):
    # 2 GPUs joined by 2 NVLinks (read by hand from the file's matrix: GPU0-GPU1 "NV2").
    src = os.path.join(ROOT, "tests", "data", "nvidia_smi_topo",
                       "2xgpu_NV2_bridge_mlengineering.txt")
    rc = _run_here(["--nodes", "2", "--procs-per-node", "2", "--topology", src,
                    "--inter-delay", "0", "--", sys.executable, "-c", _ENV_PROBE, str(tmp_path)])
    assert rc == 0
    for r, rec in enumerate(_records(tmp_path, 4)):
        assert rec["latency"] is None  # no delay added: the backend's floor stands
        host = rec["host"]
        assert host["hostname"] == f"node{r // 2}"
        assert len(host["gpus"]) == 2
        assert [n["name"] for n in host["nics"]] == ["eth0"]  # the file's NICs are not ours
        assert rec["cluster"]["ranks"][r] == {"host": r // 2, "local_rank": r % 2,
                                              "local_gpu": r % 2}


_TOPO_INIT = (
    "import json, os, sys, torch, torch.distributed as dist; "
    "from torch_topo.cluster import world_cluster; from torch_topo.plan import resolve_cluster; "
    "dist.init_process_group('topo'); t = torch.ones(1); dist.all_reduce(t); "
    "c = world_cluster(); "
    "rec = {'sum': t.item(), 'hosts': c.hostnames, 'gpus': [h.gpu_count for h in c.hosts], "
    "'nics': [[n.name for n in h.nics] for h in c.hosts], "
    "'file_ranks': resolve_cluster(os.environ['EMULATED_CLUSTER_FILE']).world_size}; "
    "json.dump(rec, open(os.path.join(sys.argv[1], 'rank%s.json' % os.environ['RANK']), 'w')); "
    "dist.destroy_process_group()"
)


@needs_root
@pytest.mark.timeout(120)
@pytest.mark.parametrize("source,gpus", [
    ("nccl_topo_xml/aws_p4d.24xlarge_8xA100_topo.xml", 8),  # 4 NICs
    ("nvidia_smi_topo/h100_8xSXM_NV18_2socket_mlengineering.txt", 8),  # no NIC listed
])
def test_topo_initialises_on_a_played_host_of_any_nic_count(tmp_path, source, gpus):
    # The nodes' files kept the source's GPU-to-NIC table beside the one emulated NIC: the
    # readers refused it, and every rank's init_process_group("topo") failed, unless the
    # source had exactly one NIC. The cluster file must load as well (the plan verb's input).
    rc = _run_here(["--nodes", "2", "--procs-per-node", "2", "--topology",
                    os.path.join(ROOT, "tests", "data", source), "--inter-delay", "0",
                    "--timeout-s", "90", "--", sys.executable, "-c", _TOPO_INIT, str(tmp_path)])
    assert rc == 0
    for rec in _records(tmp_path, 4):
        assert rec == {"sum": 4.0, "hosts": ["node0", "node1"], "gpus": [gpus, gpus],
                       "nics": [["eth0"], ["eth0"]], "file_ranks": 4}


_MESH_PLAN = (
    "import os, sys, torch.distributed as dist; from torch_topo.mesh import plan_for_world; "
    "dist.init_process_group('gloo'); "
    "text = plan_for_world((2, 2), ('dp', 'tp')).explain(); "
    "open(os.path.join(sys.argv[1], 'rank%s.txt' % os.environ['RANK']), 'w').write(text); "
    "dist.destroy_process_group()"
)


@needs_root
@pytest.mark.timeout(120)
def test_mesh_of_cpu_ranks_is_explained_on_the_nodes(tmp_path):
    # Each node pins a host of CPUs and a NIC, no GPU: the mesh stays contiguous, and its plan
    # must stand on the 2 emulated nodes (tp inside them, dp across), not one host per rank
    # (4 hosts, tp "across hosts") or one host for all.
    rc = _run_here(["--nodes", "2", "--procs-per-node", "2", "--",
                    sys.executable, "-c", _MESH_PLAN, str(tmp_path)])
    assert rc == 0
    text = (tmp_path / "rank0.txt").read_text()
    assert text.startswith("contiguous layout of mesh dp=2 x tp=2 on 4 ranks (2 host(s))"), text
    lines = {line.split(":")[0].strip(): line for line in text.splitlines()}
    assert "across hosts" in lines["dp"] and "groups [[0, 2], [1, 3]]" in lines["dp"], text
    assert "inside hosts" in lines["tp"] and "groups [[0, 1], [2, 3]]" in lines["tp"], text


def test_bad_topology_file_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text("this is not a topology\n")
    args = ["--nodes", "2", "--procs-per-node", "1", "--topology", str(bad), "--", "true"]
    assert emulate.main(args) == 2
    assert str(bad) in capsys.readouterr().err


@needs_root
@pytest.mark.timeout(60)
def test_link_is_shaped(capfd):
    mbytes, rate_bps, delay_s = 8, 200e6, 0.002
    rc = _run_here(["--nodes", "2", "--procs-per-node", "1", "--inter-bw", "200mbit",
                    "--inter-delay", "2ms", "--", sys.executable, LINKCHECK,
                    "--mbytes", str(mbytes)])
    out, err = capfd.readouterr()
    assert rc == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    # The link may run a little below its rate (TCP overhead) but never above it; an unshaped
    # veth moves 8 MiB in a few milliseconds.
    assert result["seconds"] >= 0.95 * mbytes * (1 << 20) * 8 / rate_bps
    assert result["rtt_ms"] >= 2 * delay_s * 1e3 * 0.95


@needs_root
@pytest.mark.timeout(60)
def test_every_node_knows_the_others_statically():
    # Without these entries ARP would still resolve, through the delayed switch: slower, and
    # no collective test would notice.
    links_before = _host_links()
    net = netns.ClusterNetwork(nodes=3, link=LinkSpec.parse("1gbit", "1ms"))
    try:
        net.create()
        for i in range(3):
            out = subprocess.run(["ip", "-n", net.node_ns(i), "neigh", "show", "dev", net.ifname],
                                 capture_output=True, text=True, check=True).stdout
            entries = {(words[0], words[2]) for words in map(str.split, out.splitlines())
                       if words[1] == "lladdr" and "PERMANENT" in words}
            assert entries == {(net.address(j), netns._node_mac(j)) for j in range(3) if j != i}
    finally:
        assert net.destroy() == []
    _assert_clean(os.getpid(), links_before)


@needs_root
@pytest.mark.timeout(60)
def test_failing_rank_code_and_lingering_rank_killed(capfd):
    # Rank 1 fails with 7 at once; rank 0 would sleep for a minute and is killed after the grace.
    script = "import os, sys, time; r = int(os.environ['RANK']); " \
             "sys.exit(7) if r == 1 else time.sleep(60)"
    t0 = time.monotonic()
    rc = _run_here(["--nodes", "2", "--procs-per-node", "1", "--grace-s", "1", "--",
                    sys.executable, "-c", script])
    err = capfd.readouterr().err
    assert rc == 7, err
    assert time.monotonic() - t0 < 30
    assert "killing ranks [0]" in err


@needs_root
@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_ranks_and_cleans_up(tmp_path, sig):
    marker = tmp_path / "started"
    script = f"import time; open({str(marker)!r}, 'a').close(); time.sleep(60)"

    def signal_when_started():
        deadline = time.monotonic() + 40
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), sig)  # as Ctrl-C or `kill` would, to the emulator's process

    sender = threading.Thread(target=signal_when_started)
    sender.start()
    t0 = time.monotonic()
    rc = _run_here(["--nodes", "2", "--procs-per-node", "2", "--", sys.executable, "-c", script])
    sender.join()
    assert marker.exists()
    assert rc == 128 + sig
    assert time.monotonic() - t0 < 30  # the sleeping ranks were stopped, not waited for


@needs_root
@pytest.mark.timeout(90)
def test_ctrl_c_during_setup_exits_130_and_cleans_up(tmp_path):
    # Ctrl-C at a terminal signals the whole foreground process group. A `sysctl` on PATH that
    # does so from inside the first namespace's setup, then runs the real one, lands it there.
    shim = tmp_path / "sysctl"
    shim.write_text('#!/bin/sh\n[ -e "$SHIM_DONE" ] || { : > "$SHIM_DONE"; '
                    'kill -INT "-$EMU_PGID"; }\nPATH="$REAL_PATH" exec sysctl "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ, REAL_PATH=os.environ["PATH"], SHIM_DONE=str(tmp_path / "done"),
               PATH=f"{tmp_path}:{os.environ['PATH']}")
    links_before = _host_links()
    # In a session of its own, as a terminal's foreground job: $$ is the group's id.
    proc = subprocess.Popen(
        ["sh", "-c", 'export EMU_PGID=$$; exec "$0" -m torch_topo.emulate --nodes 2 '
         '--procs-per-node 1 -- sh -c "sleep 60"', sys.executable],
        env=env, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    err = proc.communicate(timeout=80)[1]
    assert (tmp_path / "done").exists()
    assert proc.returncode == 128 + signal.SIGINT, err
    assert "got SIGINT, stopping the ranks" in err, err
    _assert_clean(proc.pid, links_before)


@needs_root
@pytest.mark.timeout(60)
def test_startup_sweeps_namespaces_of_dead_runs():
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"{netns.NS_PREFIX}{dead.pid}-n0"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    os.makedirs(f"/etc/netns/{stale}", exist_ok=True)
    try:
        assert _run_here(["--nodes", "1", "--procs-per-node", "1", "--", "true"]) == 0
        assert stale not in netns.list_namespaces()
        assert not os.path.exists(f"/etc/netns/{stale}")
    finally:
        subprocess.run(["ip", "netns", "delete", stale], capture_output=True)


def test_refuses_without_root(monkeypatch, capsys):
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert emulate.main(["--nodes", "2", "--procs-per-node", "1", "--", "true"]) == 2
    assert "needs root" in capsys.readouterr().err


@pytest.mark.parametrize("tool, package", [("hostname", "hostname"), ("sysctl", "procps")])
def test_refuses_without_a_tool_it_runs(monkeypatch, capsys, tool, package):
    # Without hostname every rank failed with "hostname: not found" (exit 127), as if the
    # user's program had; without sysctl the set-up failed with no hint.
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    real_which = netns.shutil.which
    monkeypatch.setattr(netns.shutil, "which", lambda name: None if name == tool else
                        real_which(name))
    assert emulate.main(["--nodes", "2", "--procs-per-node", "1", "--", "true"]) == 2
    assert f"`{tool}` not found; install {package}" in capsys.readouterr().err


def test_a_signal_that_fails_a_set_up_command_exits_as_the_signal(monkeypatch, capsys):
    # The set-up command the terminal's SIGINT also reached failed with it: exit 2 and that
    # command's error, where a Ctrl-C exits 130.
    def interrupted_setup(args, check):
        os.kill(os.getpid(), signal.SIGINT)
        raise netns.EmulationUnavailable("ip link add ...: -2")

    monkeypatch.setattr(emulate, "run_emulated", interrupted_setup)
    assert emulate.main(["--nodes", "2", "--procs-per-node", "1", "--", "true"]) == 130
    assert "got SIGINT during set-up, stopping" in capsys.readouterr().err


def test_refuses_when_namespaces_unavailable(monkeypatch, capsys):
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    real_run = subprocess.run

    def refuse_netns_add(cmd, *args, **kwargs):
        if cmd[:3] == ["ip", "netns", "add"]:
            return subprocess.CompletedProcess(cmd, 1, "", "mount --make-shared: Permission denied")
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(netns.subprocess, "run", refuse_netns_add)
    assert emulate.main(["--nodes", "2", "--procs-per-node", "1", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert "cannot create network namespace" in err and "Permission denied" in err


@pytest.mark.parametrize("argv,fragment", [
    (["--nodes", "0", "--procs-per-node", "1", "--", "true"], "--nodes: got 0"),
    (["--nodes", "2", "--procs-per-node", "1", "--inter-bw", "fast", "--", "true"],
     "--inter-bw: got 'fast'"),
    (["--nodes", "2", "--procs-per-node", "1", "--inter-delay", "1 parsec", "--", "true"],
     "--inter-delay: got '1 parsec'"),
    (["--nodes", "2", "--procs-per-node", "1"], "no COMMAND given"),
    # tc refused them once the namespaces were up, printing its usage or "illegal value for
    # burst" (1 ms of 35 Tbit/s is more than 2^32 bytes).
    (["--nodes", "2", "--procs-per-node", "1", "--inter-bw", "7bit", "--", "true"],
     "--inter-bw: got '7bit', expected 8kbit (the slowest link torch-topo prices) to 34.35tbit"),
    (["--nodes", "2", "--procs-per-node", "1", "--inter-bw", "35tbit", "--", "true"],
     "--inter-bw: got '35tbit', expected 8kbit (the slowest link torch-topo prices) to "
     "34.35tbit (the fastest tc can shape)"),
    # tc shapes it, but the ranks' files could not carry it (see test_slowest_rate_...).
    (["--nodes", "2", "--procs-per-node", "1", "--inter-bw", "7999bit", "--", "true"],
     "--inter-bw: got '7999bit', expected 8kbit"),
    # Accepted before: NaN disabled the timeout and the grace period; 10000 ranks per node
    # started 10000 processes.
    (["--nodes", "1", "--procs-per-node", "1", "--timeout-s", "nan", "--", "true"],
     "--timeout-s: got nan, expected a number > 0"),
    (["--nodes", "1", "--procs-per-node", "1", "--grace-s", "nan", "--", "true"],
     "--grace-s: got nan, expected a number >= 0"),
    (["--nodes", "1", "--procs-per-node", "10000", "--", "true"],
     "--procs-per-node: got 10000 x --nodes 1 = 10000 ranks, expected at most 4096 (processes "
     "started at once on this machine)"),
    # An unquoted "1 ms": "ms -- echo hi" became every rank's command (exit 127).
    (["--nodes", "2", "--procs-per-node", "1", "--inter-delay", "1", "ms", "--", "echo", "hi"],
     "got 'ms' before --, expected every option before -- and the COMMAND after it"),
    (["--nodes", "2", "--procs-per-node", "1", "echo", "hi"],
     "got 'echo' with no -- before it, expected every option before -- and the COMMAND"),
    # Accepted, then refused by every rank's TORCH_TOPO_INTER_HOST_LATENCY_US.
    (["--nodes", "2", "--procs-per-node", "1", "--inter-delay", "0.0000001", "--", "true"],
     "--inter-delay: got '0.0000001', expected 0 or at least 1ps"),
])
def test_bad_options_exit_2(argv, fragment, capsys):
    assert emulate.main(argv) == 2
    assert fragment in capsys.readouterr().err


@pytest.mark.parametrize("argv,fragment", [
    (["--nodes", "2", "--procs-per-node", "1", "--placement", "foo", "--", "true"],
     "argument --placement: invalid choice: 'foo'"),
    (["--procs-per-node", "1", "--", "true"], "the following arguments are required: --nodes"),
    (["--nodes", "x", "--procs-per-node", "1", "--", "true"],
     "argument --nodes: invalid int value: 'x'"),
])
def test_usage_errors_are_one_line_as_in_the_cli(argv, fragment, capsys):
    # argparse printed its whole usage block before the error; the CLI's verbs print one line.
    assert emulate.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith("torch_topo.emulate: error: ") and fragment in err, err


def test_rate_and_delay_units():
    # tc's convention (tc(8) "RATES"): "bit" units are bits/s, "bps" units are bytes/s.
    assert parse_rate_bps("1gbit") == 1e9
    assert parse_rate_bps("100mbit") == 1e8
    assert parse_rate_bps("125mbps") == 1e9
    assert parse_rate_bps("1kbps") == 8000  # the slowest link the ranks' files carry
    assert parse_rate_bps("34.35tbit") == 34.35e12  # 1 ms of it fits tc's 32-bit burst
    assert parse_delay_us("1ms") == 1000
    assert parse_delay_us("250us") == 250
    assert parse_delay_us("0") == 0
    assert parse_delay_us("1s") == 1e6
    # The bound the messages name: 1ps, which no unit could spell.
    assert parse_delay_us("1ps") == 1e-6 and parse_delay_us("250ns") == 0.25
    with pytest.raises(ValueError, match=r"^--inter-delay: got '0.5ps', expected 0 or at least "
                                         r"1ps"):
        parse_delay_us("0.5ps")
    # More passed, and every rank then failed on TORCH_TOPO_INTER_HOST_LATENCY_US, which the
    # emulator sets from it, naming no emulator option.
    with pytest.raises(ValueError, match=r"^--inter-delay: got '1001ms', expected at most 1s"):
        parse_delay_us("1001ms")


def test_slowest_rate_is_one_the_written_files_carry():
    # 8bit to 7999bit passed (tc shapes them), but the host file every rank reads names the
    # NIC at that line rate and the cluster file gives it as the inter-host bandwidth: below
    # 1e-6 GB/s (8 kbit/s) torch-topo JSON refused them, in every rank and in `plan`.
    # Reference: the readers' own range, [MIN_LINK_GBPS, ...] GB/s, applied to the files.
    from types import SimpleNamespace

    from torch_topo.config import MIN_LINK_GBPS
    from torch_topo.emulation.cluster_file import base_host, cluster_document, node_host
    from torch_topo.emulation.shaping import LinkSpec
    from torch_topo.plan import resolve_cluster
    from torch_topo.topology import Topology

    link = LinkSpec.parse("8kbit", "1ms")
    assert link.rate_bps / 8e9 == MIN_LINK_GBPS
    net = SimpleNamespace(link=link, ifname="eth0", hostname=lambda node: f"node{node}")
    hosts = [node_host(base_host(None), net, n) for n in range(2)]
    for host in hosts:
        Topology.from_json(json.dumps(host))
    cluster = cluster_document(hosts, place_ranks(2, 1, "contiguous"), link)
    assert resolve_cluster(cluster).world_size == 2
    with pytest.raises(ValueError, match=r"^--inter-bw: got '7999bit', expected 8kbit"):
        LinkSpec.parse("7999bit", "1ms")


def test_placement_by_hand():
    contiguous = [(s.node, s.local_rank) for s in place_ranks(2, 3, "contiguous")]
    assert contiguous == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    interleaved = [(s.node, s.local_rank) for s in place_ranks(2, 3, "interleaved")]
    assert interleaved == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
