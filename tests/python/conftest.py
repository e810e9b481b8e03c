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


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "cuda_double: runs the cuda backend on the CUDA driver double (tests/cuda_double)",
    )
    config.addinivalue_line(
        "markers",
        "mgba: needs the mgba device (the wheel builds it where libmgba-dev is installed)",
    )


def pytest_runtest_setup(item):
    """A wheel built without libmgba-dev has no mgba device: its tests skip saying so, unless
    GBX_TEST_REQUIRE_MGBA=1 (scripts/test.sh, whose build has it) turns that into a failure."""
    if "mgba" not in item.keywords:
        return
    from gbx import _native

    if _native.mgba_built_in():
        return
    why = "this gbx wheel was built without the mgba device (libmgba-dev absent)"
    if os.environ.get("GBX_TEST_REQUIRE_MGBA") == "1":
        pytest.fail(why + " but GBX_TEST_REQUIRE_MGBA=1")
    pytest.skip(why)


# ../shared beside the checkout: test ROMs, the SM83 suite, games (read-only, never committed).
SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared")


def names_shared(reason: str) -> bool:
    """Whether a skip reason names ../shared (its path as the tests spell it, normalized or
    resolved)."""
    spellings = {"../shared", os.path.normpath(SHARED), os.path.realpath(SHARED)}
    return any(s in reason for s in spellings)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With GBX_TEST_REQUIRE_SHARED=1 (scripts/test.sh's switch; CI sets it) a test that skips
    because material under ../shared is missing fails instead: every such skip names the path
    it looked at, so a new test's skip is covered without a change here."""
    outcome = yield
    rep = outcome.get_result()
    if not rep.skipped or hasattr(rep, "wasxfail"):
        return
    if os.environ.get("GBX_TEST_REQUIRE_SHARED") != "1":
        return
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    if names_shared(reason):
        rep.outcome = "failed"
        rep.longrepr = f"{reason} (GBX_TEST_REQUIRE_SHARED=1: ../shared material must be present)"


def pytest_terminal_summary(terminalreporter):
    """One line for the tests on the CUDA driver double: how many passed, failed, skipped."""
    final = {}
    for outcome, reports in terminalreporter.stats.items():
        for rep in reports:
            if "cuda_double" not in getattr(rep, "keywords", {}):
                continue
            if getattr(rep, "when", None) == "call" or outcome in ("skipped", "error"):
                final[rep.nodeid] = outcome
    if final:
        counts = {}
        for outcome in final.values():
            counts[outcome] = counts.get(outcome, 0) + 1
        terminalreporter.write_line(
            "tests on the CUDA driver double: "
            + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        )
