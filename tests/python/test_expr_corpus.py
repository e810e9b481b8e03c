"""The reward language's one corpus (tests/data/expressions.tsv) through Python: kernel rows by
the native checker (gbx._native.check_expression, the kernel's own), host rows by
gbx.expressions.compile_host, which calls it. tests/test_expr_corpus.cpp runs the same rows."""

from __future__ import annotations

from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[1] / "data" / "expressions.tsv"


def rows():
    for line in CORPUS.read_text().splitlines():
        if line and not line.startswith("#"):
            kind, verdict, text = line.split("\t", 2)
            yield pytest.param(kind, verdict, text.replace("\\n", "\n"), id=f"{kind}:{text}")


@pytest.mark.parametrize("kind,verdict,text", list(rows()))
def test_corpus(gbx, kind, verdict, text):
    if kind == "kernel":
        check = lambda: gbx._native.check_expression(text, "reward", 2, True, 2)  # noqa: E731
    else:
        check = lambda: gbx.expressions.compile_host(text, "t")  # noqa: E731
    if verdict == "ok":
        check()
    else:
        with pytest.raises(ValueError) as ei:
            check()
        assert verdict in str(ei.value)
