"""Hypothesis profiles for the property-based tests.

`ci` (the default, part of `make test`): a fixed seed and a few hundred examples per property,
well under a minute for the whole folder. `fuzz` (`make fuzz`): random seeds and many more
examples, bounded by HYPOTHESIS_MAX_EXAMPLES (`make fuzz` sets 300 per property: about a minute).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_SLOW_INPUTS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]

settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True, database=None,
                          suppress_health_check=_SLOW_INPUTS)
settings.register_profile("fuzz", max_examples=int(os.environ.get("HYPOTHESIS_MAX_EXAMPLES", "2000")),
                          deadline=None, suppress_health_check=_SLOW_INPUTS)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
