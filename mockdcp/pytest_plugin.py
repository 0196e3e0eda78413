"""mockdcp's pytest plugin, registered through the ``pytest11`` entry point.

The fixtures of design.md (``mockdcp``, ``mockdcp_factory``, marker ``mockdcp``) belong
to the scenario/embedding issue and are not defined yet; the entry point is reserved now
so that installing mockdcp registers the plugin from the first release on. Until then the
server is embedded with ``mockdcp.server.serve`` (see the README).
"""

from __future__ import annotations
