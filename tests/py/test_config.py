# SPDX-License-Identifier: Apache-2.0
"""TopoConfig: validation and the TORCH_TOPO_* environment."""

import pytest

from torch_topo import TopoConfig


def test_env_sets_fields_and_overrides_win():
    cfg = TopoConfig.from_env(
        {"TORCH_TOPO_TIMEOUT": "7.5", "TORCH_TOPO_AWARE": "0", "TORCH_TOPO_CHUNK_BYTES": "65536"},
        bind_numa=True,
    )
    assert cfg.timeout_s == 7.5
    assert cfg.use_topo_aware_collectives is False
    assert cfg.pipeline_chunk_bytes == 65536
    assert cfg.bind_numa is True


@pytest.mark.parametrize(
    "env, fragment",
    [
        ({"TORCH_TOPO_NOPE": "1"}, "unknown variable TORCH_TOPO_NOPE"),
        ({"TORCH_TOPO_AWARE": "maybe"}, "TORCH_TOPO_AWARE: got 'maybe'"),
        ({"TORCH_TOPO_TIMEOUT": "-1"}, "timeout_s: got -1.0"),
        ({"TORCH_TOPO_HIERARCHICAL": "sometimes"}, "hierarchical: got 'sometimes'"),
    ],
)
def test_bad_values_name_the_field(env, fragment):
    with pytest.raises(ValueError, match=fragment):
        TopoConfig.from_env(env)


def test_unknown_field_is_a_type_error():
    with pytest.raises(TypeError, match="no_such_field"):
        TopoConfig(no_such_field=1)
