"""The README's usage example runs, and its set-up commands exist as documented."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

pytestmark = pytest.mark.skipif(not README.exists(), reason="not run from a source checkout")


def test_usage_example_runs(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks, "the README has a Python example"
    script = tmp_path / "example.py"
    script.write_text("\n".join(blocks), encoding="utf-8")
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr


def test_set_up_commands_exist_and_ci_runs_the_test_command() -> None:
    text = README.read_text(encoding="utf-8")
    for command in ("./scripts/demo", "./scripts/test"):
        assert f"\n{command}\n" in text
        path = ROOT / command
        assert path.is_file() and os.access(path, os.X_OK), f"{command} must be executable"
        subprocess.run(["bash", "-n", str(path)], check=True)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^exec \./scripts/test$", ci, re.MULTILINE)


def test_lock_and_newest_release_commands_exist() -> None:
    text = README.read_text(encoding="utf-8")
    for command in ("./scripts/test-latest", "./scripts/lock"):
        assert re.search(rf"^{re.escape(command)}\b", text, re.MULTILINE)
        path = ROOT / command
        assert path.is_file() and os.access(path, os.X_OK), f"{command} must be executable"
        subprocess.run(["bash", "-n", str(path)], check=True)
