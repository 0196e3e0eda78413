"""mockdcp: a mock Couchbase DCP producer for testing DCP consumers."""

from __future__ import annotations

from mockdcp._errors import (
    LocalProtocolError as LocalProtocolError,
)
from mockdcp._errors import (
    MockDcpError as MockDcpError,
)
from mockdcp._errors import (
    ModelError as ModelError,
)
from mockdcp._errors import (
    ProtocolError as ProtocolError,
)
from mockdcp._errors import (
    RemoteProtocolError as RemoteProtocolError,
)
from mockdcp._errors import (
    ScenarioError as ScenarioError,
)
from mockdcp._errors import (
    ServerError as ServerError,
)

__version__ = "0.1.0"
