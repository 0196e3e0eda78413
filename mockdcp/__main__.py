"""``python -m mockdcp``."""

from __future__ import annotations

import sys

from mockdcp.cli import main

sys.exit(main())
