"""Kernel cache warnings reach Python: a refused cache directory (writable by others) is a
gbx.CacheWarning from VecEnv, which still runs (compiling in memory)."""

import os

import numpy as np
import pytest

ROM = "builtin:ALU_LOOP"


def test_refused_cache_dir_warns_and_runs(gbx, tmp_path, monkeypatch):
    shared = tmp_path / "shared-cache"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("GBX_CACHE_DIR", str(shared))
    with pytest.warns(gbx.CacheWarning) as record:
        env = gbx.VecEnv(ROM, num_envs=1)
    try:
        cache = [w for w in record if issubclass(w.category, gbx.CacheWarning)]
        assert [str(w.message) for w in cache] == [
            f"cache: refusing {shared}: writable by group or others (mode 0777); "
            "compiling in memory"
        ]
        assert cache[0].filename == __file__  # points at the VecEnv(...) line
        env.reset(seed=0)
        env.step(np.zeros(1, dtype=np.int64))
    finally:
        env.close()
    assert not (shared / "kernels").exists()
