# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo.emulate`: run a command as the ranks of an emulated multi-node cluster.

    python -m torch_topo.emulate --nodes 2 --procs-per-node 4 --inter-bw 1gbit \\
        --inter-delay 1ms --placement contiguous -- python train.py

One network namespace and host name per node, loopback inside a node, rate-limited and delayed
links between nodes (docs/emulator.md). With `--one-gpu [GPU]` the ranks are plain local
processes that all run on one GPU while "topo" plays N hosts of the `--topology` host
(torch_topo.emulation.one_gpu; no root needed). Exit code: the first failing rank's code, 124
when ranks had to be killed, 2 for usage errors or when the emulator cannot run here (not root,
namespaces unavailable), 128 + N when the emulator itself got signal N.
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile

from torch_topo.cli import OneLineErrorParser
from torch_topo.emulation import cluster_file, netns, one_gpu
from torch_topo.emulation.launcher import (
    RankProcesses,
    die_with_parent,
    node_wrapper,
    place_ranks,
)
from torch_topo.emulation.shaping import LinkSpec
from torch_topo.validation import MAX_LOCAL_PROCESSES

__all__ = ["main", "build_parser"]

_MAX_NODES = 250  # one /24 of node addresses
_RELAY_START_S = 20.0
_RELAY_SCRIPT = os.path.join(os.path.dirname(__file__), "emulation", "relay.py")


class _Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _StopSignals:
    """Records SIGINT/SIGTERM/SIGHUP for the whole of main(): raising from the handler could land
    inside Popen and lose track of a rank being spawned, or between a folder's creation and the
    try that removes it; `check()` raises where every child and file is accounted for. From the
    start, not from the first rank: a Ctrl-C during set-up ended in a KeyboardInterrupt
    traceback (and left the run's folder behind)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __enter__(self) -> _StopSignals:
        self.got: list[int] = []
        self._old = {s: signal.signal(s, self._record) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)

    def _record(self, signum, _frame) -> None:
        self.got.append(signum)

    def check(self) -> None:
        if self.got:
            raise _Interrupted(self.got[0])


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="python -m torch_topo.emulate",
        description="Run COMMAND as the ranks of an emulated N-node cluster.",
    )
    parser.add_argument("--nodes", type=int, required=True, help="number of emulated hosts")
    parser.add_argument("--procs-per-node", type=int, required=True, help="ranks per host")
    parser.add_argument("--inter-bw", default=None,
                        help="inter-node line rate per direction, tc units (default 1gbit)")
    parser.add_argument("--inter-delay", default=None,
                        help="one-way node-to-node delay (default 1ms)")
    parser.add_argument("--placement", choices=("contiguous", "interleaved"),
                        default="contiguous",
                        help="contiguous: node-major ranks; interleaved: rank i on node i mod N")
    parser.add_argument("--topology", metavar="FILE", default=None,
                        help="host topology file every node plays (named in TORCH_TOPO_FILE)")
    parser.add_argument("--one-gpu", metavar="GPU", type=int, nargs="?", const=0, default=None,
                        help="rehearsal: every rank on this GPU (default 0) as a local process, "
                             "a distinct NCCL_HOSTID each, playing N hosts of --topology")
    parser.add_argument("--nccl-env", metavar="KEY=VALUE", action="append", default=[],
                        help="with --one-gpu: an NCCL_* variable for every rank (repeatable), "
                             "e.g. NCCL_P2P_DISABLE=1")
    parser.add_argument("--master-port", type=int, default=None,
                        help="default 29500; with --one-gpu a free local port")
    parser.add_argument("--grace-s", type=float, default=30.0,
                        help="seconds the other ranks may run on after one exits (default 30)")
    parser.add_argument("--timeout-s", type=float, default=None,
                        help="kill the whole run after this many seconds")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    return parser


def _validate(args: argparse.Namespace) -> tuple[LinkSpec | None, list[str]]:
    """The emulated link (None for the one-GPU rehearsal, which has none) and the command."""
    if not 1 <= args.nodes <= _MAX_NODES:
        raise ValueError(f"--nodes: got {args.nodes}, expected 1..{_MAX_NODES}")
    if args.procs_per_node < 1:
        raise ValueError(f"--procs-per-node: got {args.procs_per_node}, expected >= 1")
    if args.nodes * args.procs_per_node > MAX_LOCAL_PROCESSES:
        # A typo such as 10000 started that many processes before anything could fail.
        raise ValueError(f"--procs-per-node: got {args.procs_per_node} x --nodes {args.nodes} = "
                         f"{args.nodes * args.procs_per_node} ranks, expected at most "
                         f"{MAX_LOCAL_PROCESSES} (processes started at once on this machine)")
    if args.master_port is not None and not 1 <= args.master_port <= 65535:
        raise ValueError(f"--master-port: got {args.master_port}, expected 1..65535")
    # NaN passed both comparisons: the run then never timed out and never waited its grace.
    if not args.grace_s >= 0:
        raise ValueError(f"--grace-s: got {args.grace_s}, expected a number >= 0")
    if args.timeout_s is not None and not args.timeout_s > 0:
        raise ValueError(f"--timeout-s: got {args.timeout_s}, expected a number > 0")
    if args.topology is not None and not os.path.isfile(args.topology):
        raise ValueError(f"--topology: {args.topology!r} is not a file")
    if args.command and args.command[0] != "--":
        # An option's stray second word ("--inter-delay 1 ms") became the command, "--" and all.
        where = "before --" if "--" in args.command else "with no -- before it"
        raise ValueError(f"got {args.command[0]!r} {where}, expected every option before -- "
                         "and the COMMAND after it")
    command = args.command[1:]
    if not command:
        raise ValueError("no COMMAND given; usage: python -m torch_topo.emulate ... -- COMMAND")
    if args.one_gpu is not None:
        _validate_one_gpu(args)
        return None, command
    if args.nccl_env:
        raise ValueError("--nccl-env: only with --one-gpu")
    link = LinkSpec.parse(args.inter_bw or "1gbit", args.inter_delay or "1ms")
    return link, command


def _validate_one_gpu(args: argparse.Namespace) -> None:
    if args.topology is None:
        raise ValueError("--one-gpu: needs --topology FILE, the host of the target cluster every "
                         "node plays (e.g. its `nvidia-smi topo -m` output)")
    shaped = [o for o, v in (("--inter-bw", args.inter_bw), ("--inter-delay", args.inter_delay))
              if v is not None]
    if shaped:
        raise ValueError(f"{shaped[0]}: not with --one-gpu (the ranks' links are loopback "
                         "sockets; the played hosts' NIC speeds are what topo plans with)")
    for item in args.nccl_env:
        key, sep, _ = item.partition("=")
        if not sep or not key.startswith("NCCL_"):
            raise ValueError(f"--nccl-env: got {item!r}, expected NCCL_NAME=VALUE")
        if key == "NCCL_HOSTID":
            raise ValueError("--nccl-env: NCCL_HOSTID is set per rank by --one-gpu")


def _start_relay(net: netns.ClusterNetwork) -> subprocess.Popen:
    cmd = ["ip", "netns", "exec", net.switch_ns, sys.executable, _RELAY_SCRIPT,
           "--delay-us", str(net.link.delay_us)]
    for port in net.relay_ports():
        cmd += ["--port", port]
    relay = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True,
                             preexec_fn=die_with_parent)
    # The first line is "relay ready" once every port socket is bound; a relay that hangs
    # before it would hang the run.
    ready = ""
    if relay.stdout and select.select([relay.stdout], [], [], _RELAY_START_S)[0]:
        ready = relay.stdout.readline().strip()
    if ready != "relay ready":
        relay.kill()
        raise netns.EmulationUnavailable(f"torch_topo.emulate: switch relay did not start "
                                         f"within {_RELAY_START_S:g} s (exit {relay.wait()})")
    return relay


def _write_topology_files(workdir: str, net: netns.ClusterNetwork, ranks,
                          base: dict) -> list[str]:
    """Writes node<i>.json per node and cluster.json; returns the host file paths."""
    hosts = [cluster_file.node_host(base, net, i) for i in range(net.nodes)]
    paths = []
    for i, host in enumerate(hosts):
        paths.append(os.path.join(workdir, f"node{i}.json"))
        cluster_file.write_json(paths[-1], host)
    cluster_file.write_json(os.path.join(workdir, "cluster.json"),
                            cluster_file.cluster_document(hosts, ranks, net.link))
    return paths


def _run_ranks(procs: RankProcesses, args: argparse.Namespace, check, start, cleanup) -> int:
    """Runs `start(check)` (which spawns the ranks), watches the ranks, then stops them and
    runs `cleanup()` on every exit path; `check` raises _Interrupted once a stop signal came."""
    try:
        check()  # a signal during the set-up: no rank starts
        start(check)
        return procs.watch(args.grace_s, args.timeout_s, check)
    finally:
        # Further signals must not cut the cleanup short (main() restores the handlers).
        for sig in _StopSignals.SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        procs.stop()
        cleanup()


def run_one_gpu(args: argparse.Namespace, command: list[str], check) -> int:
    """The rehearsal: every rank a local process on one GPU, playing the --topology host;
    `check` raises once a stop signal came."""
    gpu = one_gpu.visible_gpu(args.one_gpu, os.environ)
    ranks = place_ranks(args.nodes, args.procs_per_node, args.placement)
    nccl_env = dict(item.split("=", 1) for item in args.nccl_env)
    port = args.master_port or one_gpu.free_port()
    workdir = tempfile.mkdtemp(prefix="torch-topo-rehearsal-")
    try:
        # Before any rank starts: a bad --topology file or too many ranks per host fail fast.
        host_path, cluster_path = one_gpu.write_files(workdir, args.topology, ranks, args.nodes)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    procs = RankProcesses()

    def start(check) -> None:
        for spec in ranks:
            env = one_gpu.rank_env(os.environ, spec, len(ranks), gpu=gpu, master_port=port,
                                   run_id=str(os.getpid()), host_path=host_path,
                                   cluster_path=cluster_path, nccl_env=nccl_env)
            check()
            procs.spawn(spec, command, env)

    return _run_ranks(procs, args, check, start,
                      lambda: shutil.rmtree(workdir, ignore_errors=True))


def _rank_env(base: dict[str, str], spec, world: int, net: netns.ClusterNetwork,
              master_port: int, host_path: str, cluster_path: str) -> dict[str, str]:
    env = dict(base)
    env.update({
        "RANK": str(spec.rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(spec.local_rank),
        "LOCAL_WORLD_SIZE": str(spec.local_world_size),
        "GROUP_RANK": str(spec.node),
        "NODE_RANK": str(spec.node),
        "MASTER_ADDR": net.address(0),
        "MASTER_PORT": str(master_port),
        # What a user pins on a real cluster: this host's topology with its NIC speed.
        "TORCH_TOPO_FILE": host_path,
        # Not a TORCH_TOPO_* variable (TopoConfig refuses unknown ones): for tools and tests.
        "EMULATED_CLUSTER_FILE": cluster_path,
    })
    # And the latency between hosts a user would measure and pin (a NIC speed says nothing of
    # it); with no delay added, only the kernel's own, which the default floor covers.
    if net.link.delay_us > 0:
        env.setdefault("TORCH_TOPO_INTER_HOST_LATENCY_US", repr(net.link.delay_us))
    # As torchrun does for several ranks per machine: one compute thread each, unless the user
    # chose; otherwise every rank's OpenMP pool spins on the same few cores.
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_emulated(args: argparse.Namespace, check) -> int:
    """Runs the emulated cluster; `check` raises once a stop signal came."""
    link, command = _validate(args)
    if link is None:
        return run_one_gpu(args, command, check)
    # Before any namespace exists: a bad --topology file fails fast, root or not.
    base_host = cluster_file.base_host(args.topology)
    netns.check_available()
    swept = netns.sweep_stale()
    if swept:
        print(f"torch_topo.emulate: removed {len(swept)} namespaces left by crashed runs",
              file=sys.stderr)
    net = netns.ClusterNetwork(nodes=args.nodes, link=link)
    ranks = place_ranks(args.nodes, args.procs_per_node, args.placement)
    workdir = tempfile.mkdtemp(prefix=f"{net.prefix}-")
    procs = RankProcesses()
    relay: list[subprocess.Popen] = []

    def start(check) -> None:
        host_paths = _write_topology_files(workdir, net, ranks, base_host)
        net.create()
        check()
        relay.append(_start_relay(net))
        for spec in ranks:
            env = _rank_env(os.environ, spec, len(ranks), net, args.master_port or 29500,
                            host_paths[spec.node], os.path.join(workdir, "cluster.json"))
            check()
            procs.spawn(spec, command, env,
                        node_wrapper(net.node_ns(spec.node), net.hostname(spec.node)))

    def cleanup() -> None:
        for proc in relay:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        left = net.destroy()
        shutil.rmtree(workdir, ignore_errors=True)
        if left:
            print(f"torch_topo.emulate: could not delete namespaces {left}", file=sys.stderr)

    return _run_ranks(procs, args, check, start, cleanup)


def main(argv: list[str] | None = None) -> int:
    with _StopSignals() as signals:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:
            return int(exc.code or 0)
        try:
            return run_emulated(args, signals.check)
        except _Interrupted as exc:
            print(f"torch_topo.emulate: got {exc}, stopping the ranks", file=sys.stderr)
            return 128 + exc.signum
        except netns.EmulationUnavailable as exc:
            if signals.got:  # the set-up command the signal reached failed with it
                print(f"torch_topo.emulate: got {signal.Signals(signals.got[0]).name} during "
                      "set-up, stopping", file=sys.stderr)
                return 128 + signals.got[0]
            print(exc, file=sys.stderr)
            return 2
        except (ValueError, RuntimeError) as exc:  # bad options, unreadable --topology file
            print(f"torch_topo.emulate: error: {exc}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
