from __future__ import annotations

import os

from hypothesis import settings

# 200 examples per property in CI; `--hypothesis-profile=thorough` (or
# MOCKDCP_HYPOTHESIS=thorough) runs thousands.
settings.register_profile("ci", max_examples=200, deadline=None)
settings.register_profile("thorough", max_examples=5000, deadline=None)
settings.load_profile(os.environ.get("MOCKDCP_HYPOTHESIS", "ci"))
