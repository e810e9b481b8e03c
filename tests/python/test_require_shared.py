"""GBX_TEST_REQUIRE_SHARED=1 (scripts/test.sh's switch; CI sets it): a test that skips because
a file under ../shared is missing fails instead, and a skip for anything else stays a skip
(conftest.py's pytest_runtest_makereport). Runs pytest on two tiny tests in a subprocess."""

import os
import subprocess
import sys
import textwrap

from conftest import SHARED, names_shared

HERE = os.path.dirname(os.path.abspath(__file__))


def run_pytest(tmp_path, require):
    (tmp_path / "test_inner.py").write_text(
        textwrap.dedent(
            f"""
            import os
            import pytest

            def test_needs_a_shared_file():
                path = os.path.join({SHARED!r}, "no-such-suite", "x.gb")
                pytest.skip(f"{{path}} not present (../shared/no-such-suite)")

            def test_needs_gdb():
                pytest.skip("no gdb")
            """
        )
    )
    env = dict(os.environ, GBX_TEST_REQUIRE_SHARED=require, PYTHONPATH=HERE)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "conftest", "-p", "no:cacheprovider"]
        + ["-p", "no:xdist", str(tmp_path / "test_inner.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_shared_skip_fails_only_with_the_switch(tmp_path):
    off = run_pytest(tmp_path, "0")
    assert off.returncode == 0, off.stdout + off.stderr
    assert "2 skipped" in off.stdout
    on = run_pytest(tmp_path, "1")
    assert on.returncode == 1, on.stdout + on.stderr
    assert "1 failed, 1 skipped" in on.stdout
    assert "GBX_TEST_REQUIRE_SHARED=1: ../shared material must be present" in on.stdout
    assert "no gdb" in on.stdout  # still a skip, with its reason


def test_names_shared():
    assert names_shared("/x/tests/python/../../../shared/games/2048.gb not present")
    assert names_shared(os.path.normpath(os.path.join(SHARED, "games", "libbet.gb")) + " absent")
    assert not names_shared("pufferlib 3 not installed")
