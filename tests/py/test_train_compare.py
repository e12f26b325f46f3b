# SPDX-License-Identifier: Apache-2.0
"""benchmarks/train_compare.py refuses options its configurations cannot run with before the
first launch."""

from __future__ import annotations

import pytest
from benchmark_scripts import load_benchmark


@pytest.fixture
def train_compare(monkeypatch):
    module = load_benchmark("train_compare")

    def launch(*args, **kwargs):
        raise AssertionError("a configuration was launched")

    monkeypatch.setattr(module, "run_one", launch)
    return module


@pytest.mark.parametrize("options, message", [
    # Every launch failed in turn ("--dp x --tp x --sp: got 8 ... expected the world size 4"),
    # then a table of failures, exit 1.
    (["--procs-per-node", "2"], "--nodes x --procs-per-node: got 2 x 2, expected 8 ranks"),
    (["--nodes", "0"], "--nodes x --procs-per-node: got 0 x 4, expected 8 ranks"),
    (["--inter-bw", "fast"], "--inter-bw: got 'fast', expected a positive rate"),
    (["--inter-delay", "soon"], "--inter-delay: got 'soon', expected a delay"),
    (["--timeout", "0"], "--timeout: got 0.0, expected seconds > 0"),
    # A traceback once every launch had run.
    (["--json", "/nonexistent/out.json"], "--json: no folder to write '/nonexistent/out.json'"),
    (["--json", "/tmp"], "--json: '/tmp' is a folder, expected a file name"),
])
def test_bad_options_exit_2_before_any_launch(options, message, train_compare, capsys):
    with pytest.raises(SystemExit) as exc:
        train_compare.main(["--quick", *options])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"error: {message}" in err, err
