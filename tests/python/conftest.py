import os

import pytest

# Tests compile kernels into their own cache, never the user's (scripts/test.sh sets it too).
os.environ.setdefault(
    "GBX_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build", "test-cache")
)

ROM = "builtin:ALU_LOOP"


@pytest.fixture(scope="module")
def gbx():
    import gbx as module

    return module
