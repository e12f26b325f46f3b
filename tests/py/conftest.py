# SPDX-License-Identifier: Apache-2.0
"""The suite's root: pytest puts this folder on sys.path for it, so tests in backend/ and ops/
import the helpers kept here (rank_processes) however they are selected."""
