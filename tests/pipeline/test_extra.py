from __future__ import annotations

import importlib.util

import pytest

from mockdcp.data._errors import PipelineError, require_pipeline


def test_without_the_pipeline_extra_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "pyspark" else real(name)
    )
    require_pipeline(spark=False)
    with pytest.raises(
        PipelineError, match=r"pyspark not installed: pip install 'mockdcp\[pipeline\]'"
    ):
        require_pipeline()
