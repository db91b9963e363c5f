"""``nadaraya fit --scheduler``: the fit on a Dask cluster, and clear errors."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import nadaraya
from nadaraya.cli import _scheduler as cli_scheduler
from nadaraya.cli import main

distributed = pytest.importorskip("distributed")


def _data(path: Path, rng: np.random.Generator, n: int = 80) -> Path:
    x = np.round(rng.uniform(0, 6, n), 4)
    y = np.round(2 * np.sin(x) + 0.5 * rng.normal(size=n), 4)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["x", "y"])
        writer.writerows(zip(x, y, strict=True))
    return path


def _read(path: Path) -> tuple[list[str], np.ndarray]:
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], np.array(rows[1:], dtype=float)


def test_a_bad_address_names_the_option(tmp_path: Path, rng: np.random.Generator,
                                        monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli_scheduler, "CONNECT_TIMEOUT", "1s")
    data = _data(tmp_path / "data.csv", rng)
    out = tmp_path / "out.csv"
    status = main(["fit", str(data), "--x", "x", "--y", "y", "--bandwidth", "0.5",
                   "--scheduler", "tcp://127.0.0.1:1", "--out", str(out)])
    assert status == 1
    err = capsys.readouterr().err
    assert "--scheduler 'tcp://127.0.0.1:1'" in err and "no Dask scheduler" in err
    assert not out.exists()


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:1", "nowhere://host:1"])
def test_a_failed_connection_leaves_dask_as_it_was(address: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import dask
    import dask.array as da

    monkeypatch.setattr(cli_scheduler, "CONNECT_TIMEOUT", "1s")
    before = dask.config.get("scheduler", None)
    with pytest.raises(nadaraya.NadarayaError, match="--scheduler"):
        with cli_scheduler.scheduler(address):
            pass  # pragma: no cover - the connection fails
    assert dask.config.get("scheduler", None) == before
    # a client that never connected must not stay the default: computations would wait on it
    with pytest.raises(ValueError, match="No clients found"):
        distributed.Client.current(allow_global=True)
    assert float(da.ones(10, chunks=5).sum().compute()) == 10.0


@pytest.mark.slow
@pytest.mark.parametrize("source", ["csv", "parquet"])
def test_a_fit_on_a_local_cluster_matches_the_fit_here(
        tmp_path: Path, rng: np.random.Generator, capsys: pytest.CaptureFixture[str],
        source: str) -> None:
    data = _data(tmp_path / "data.csv", rng)
    here, there = tmp_path / "here.csv", tmp_path / "there.csv"
    assert main(["fit", str(data), "--x", "x", "--y", "y", "--out", str(here)]) == 0
    printed_here = capsys.readouterr().out
    if source == "parquet":
        import pandas as pd

        pd.read_csv(data).to_parquet(tmp_path / "data.parquet")
        data = tmp_path / "data.parquet"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:
        assert main(["fit", str(data), "--x", "x", "--y", "y", "--out", str(there),
                     "--scheduler", cluster.scheduler_address]) == 0
    printed_there = capsys.readouterr().out
    bandwidth = [line for line in printed_here.splitlines() if line.startswith("bandwidth")]
    assert bandwidth and bandwidth[0] in printed_there
    header_here, rows_here = _read(here)
    header_there, rows_there = _read(there)
    assert header_there == header_here[:2]
    np.testing.assert_allclose(rows_there, rows_here[:, :2], rtol=1e-9)
