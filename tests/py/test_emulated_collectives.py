# SPDX-License-Identifier: Apache-2.0
"""benchmarks/emulated_collectives.py refuses bad options before the first launch."""

from __future__ import annotations

import pytest
from benchmark_scripts import load_benchmark


@pytest.fixture
def emulated_collectives(monkeypatch):
    module = load_benchmark("emulated_collectives")

    def launch(*args, **kwargs):
        raise AssertionError("a placement was launched")

    monkeypatch.setattr(module, "run_placement", launch)
    return module


@pytest.mark.parametrize("options, message", [
    # Failed in the emulator or its ranks, once per placement, then exit 1.
    (["--placements", "foo"], "--placements: got 'foo', expected some of contiguous,interleaved"),
    # Measured, then left out of every table.
    (["--ops", "all_to_all"], "--ops: got 'all_to_all', expected some of all_reduce,"),
    (["--procs-per-node", "0"], "--nodes/--procs-per-node: got 2/0, expected >= 1 each"),
    (["--max-bytes", "1K"], "--min-bytes/--max-bytes: got 262144/1024"),
    (["--reps", "0"], "--reps: got 0, expected >= 1"),
    # A traceback from parse_rate_bps.
    (["--inter-bw", "fast"], "--inter-bw: got 'fast', expected a positive rate"),
    (["--inter-delay", "soon"], "--inter-delay: got 'soon', expected a delay"),
    # Tracebacks once every placement had run.
    (["--json", "/nonexistent/out.json"], "--json: no folder to write '/nonexistent/out.json'"),
    (["--plot", "/nonexistent/out.png"], "--plot: no folder to write '/nonexistent/out.png'"),
    (["--json", "/tmp"], "--json: '/tmp' is a folder, expected a file name"),
    (["--plot", "/tmp/"], "--plot: '/tmp/' is a folder, expected a file name"),
])
def test_bad_options_exit_2_before_any_launch(options, message, emulated_collectives, capsys):
    with pytest.raises(SystemExit) as exc:
        emulated_collectives.main(options)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"error: {message}" in err, err
