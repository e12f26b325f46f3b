# SPDX-License-Identifier: Apache-2.0
"""Ctrl-C before the first rank of `python -m torch_topo.emulate` starts: exit 130 with the
one-line message of a later Ctrl-C, no traceback, nothing started or left behind. The signal is
sent at a known point of the start-up (not after a sleep), so a loaded host only delays it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# 8 A100, 4 NICs: any host file the one-GPU rehearsal takes.
P4D = os.path.join(ROOT, "tests", "data", "nccl_topo_xml", "aws_p4d.24xlarge_8xA100_topo.xml")

# Runs the emulator with `setup_step` (one_gpu.write_files or netns.sweep_stale) wrapped to
# signal this process, as a terminal's Ctrl-C would, before it does its work.
_SIGNAL_DURING_SETUP = """
import os, signal, sys
from torch_topo import emulate
from torch_topo.emulation import netns, one_gpu
module, name = {{"write_files": one_gpu, "sweep_stale": netns}}[{step!r}], {step!r}
real = getattr(module, name)
def interrupted(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    return real(*args, **kwargs)
setattr(module, name, interrupted)
sys.exit(emulate.main(sys.argv[1:]))
"""


def _start(argv: list[str], tmp_path, **popen) -> subprocess.Popen:
    """The emulator with SIGINT at its default (a test runner started in the background may
    have it ignored), its folders under tmp_path/tmp."""
    (tmp_path / "tmp").mkdir()
    return subprocess.Popen(argv, env=dict(os.environ, TMPDIR=str(tmp_path / "tmp")),
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            **popen)


def _rank_command(tmp_path) -> list[str]:
    return ["--", sys.executable, "-c", f"open({str(tmp_path / 'started')!r}, 'w')"]


def _assert_quiet_stop(proc: subprocess.Popen, err: str, tmp_path) -> None:
    assert proc.returncode == 128 + signal.SIGINT, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert not (tmp_path / "started").exists()  # no rank ran
    assert os.listdir(tmp_path / "tmp") == []  # the run's folder is gone


needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="the emulator needs root (network namespaces)")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("step,options", [
    ("write_files", ["--one-gpu", "--topology", P4D]),
    pytest.param("sweep_stale", [], marks=needs_root),
])
def test_ctrl_c_during_setup_exits_130_quietly(tmp_path, step, options):
    # Before: the signal raised KeyboardInterrupt there, a traceback, killed by SIGINT (-2).
    proc = _start([sys.executable, "-c", _SIGNAL_DURING_SETUP.format(step=step), "--nodes", "1",
                   "--procs-per-node", "1", *options, *_rank_command(tmp_path)], tmp_path)
    err = proc.communicate(timeout=150)[1]
    _assert_quiet_stop(proc, err, tmp_path)
    assert "torch_topo.emulate: got SIGINT, stopping the ranks" in err, err[-3000:]


@pytest.mark.timeout(180)
def test_ctrl_c_while_torch_imports_exits_130_quietly(tmp_path):
    # -X importtime writes a line as each module finishes loading: the first line of a torch
    # submodule comes early in `import torch`, which then runs on for a second or more.
    proc = _start([sys.executable, "-X", "importtime", "-m", "torch_topo.emulate", "--one-gpu",
                   "--topology", P4D, "--nodes", "1", "--procs-per-node", "1",
                   *_rank_command(tmp_path)], tmp_path)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.rsplit("|", 1)[-1].strip().startswith("torch."):
            break
    proc.send_signal(signal.SIGINT)
    err = "".join(seen) + proc.communicate(timeout=150)[1]
    _assert_quiet_stop(proc, err, tmp_path)


def test_a_ctrl_c_swallowed_while_loading_ends_the_command_once_loaded(monkeypatch):
    # The handler's SystemExit raised inside an import that catches broad exceptions (numpy's
    # docstring set-up) was lost, and the command ran on to its end (or its --timeout-s).
    from torch_topo import _quiet_start

    monkeypatch.setattr(_quiet_start, "_active", True)
    monkeypatch.setattr(_quiet_start, "_got", [])
    saved = signal.getsignal(signal.SIGINT)
    try:
        _quiet_start.done()  # nothing came: loading ends quietly
        with pytest.raises(SystemExit) as stopped:
            _quiet_start._exit_quietly(signal.SIGINT, None)
        assert stopped.value.code == 130
        with pytest.raises(SystemExit) as again:  # swallowed by the import: done() ends it
            _quiet_start.done()
        assert again.value.code == 130
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, saved)
