"""Ports for servers a test names before they bind: go-dcp's API, a container's published
ports, drawn below the kernel's ephemeral range as ``bench startup`` draws its own
(``mockdcp.cli.bench._ports``, whose docstring says why)."""

from __future__ import annotations

from mockdcp.cli.bench._ports import unclaimed_port

__all__ = ["unclaimed_port"]
