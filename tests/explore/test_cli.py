"""``nadaraya explore`` on the command line: cheap imports, a busy port refused."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from nadaraya import NadarayaError
from nadaraya.cli import main


def test_help_and_import_do_not_load_panel() -> None:
    code = ("import sys, contextlib, io\nimport nadaraya\nfrom nadaraya.cli import build_parser\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "    build_parser().parse_args(['explore', '--help'])\n"
            "print('panel' in sys.modules, 'bokeh' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["False", "False"]


def test_busy_port_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("panel")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert main(["explore", "--port", str(port), "--no-browser"]) == 1
    err = capsys.readouterr().err
    assert f"--port {port} is already in use" in err and "--port 0" in err


@pytest.mark.parametrize("port", ["-1", "70000", "abc"])
def test_bad_port_is_a_usage_error(port: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["explore", "--port", port])
    assert exc.value.code == 2


def test_check_port() -> None:
    pytest.importorskip("panel")
    from nadaraya.explore import check_port

    assert check_port(0) > 0
    with pytest.raises(NadarayaError, match="--port must be"):
        check_port(65536)
    with pytest.raises(NadarayaError, match="cannot listen"):
        check_port(0, "203.0.113.1")  # a documentation address no interface has
    for address in ("", "a\x00b", "\udcff", "x" * 300):
        with pytest.raises(NadarayaError, match="--address"):
            check_port(0, address)


def test_check_builds_the_page(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("panel")
    assert main(["explore", "--check", "--port", "0"]) == 0
    out = capsys.readouterr().out
    assert "4 tabs: Regression, Attention, Images, Scale" in out


def test_missing_browser_message(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.explore import conftest

    monkeypatch.setattr(conftest.shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "false")
    assert conftest.find_chromium() is None
    assert "apt-get install chromium" in conftest.MISSING
