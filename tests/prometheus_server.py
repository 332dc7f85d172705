"""A real Prometheus for the tests: Debian's ``prometheus`` (``.ci/run`` installs it) on
127.0.0.1 and a free port, with a store of its own, scraping one target every second; and its
HTTP API read back (``/api/v1/query``).

Not the apt package's service: each test starts its own server and stops it when done.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from node_tools import require_installed, stop
from servers import free_port

#: What the tests that start one say when there is none.
WHY = (
    "no Prometheus found (neither `prometheus` on PATH nor /usr/bin/prometheus): the metrics "
    "test scrapes the bridge with a real one. Debian/Ubuntu: apt-get install prometheus "
    "(`.ci/run` does)"
)
#: Seconds between scrapes: the shortest Prometheus takes (the test waits for one after it acts).
SCRAPE_INTERVAL = 1


def require_prometheus() -> str:
    """The ``prometheus`` program (skipped without it; a failure in CI)."""
    return require_installed("prometheus", "/usr/bin/prometheus", WHY)


#: One series of an instant vector: its labels and its value.
Sample = tuple[dict[str, str], float]


@dataclass
class Prometheus:
    """A running Prometheus scraping one target as ``job``."""

    url: str
    job: str
    log: Path

    def query(self, expr: str) -> list[Sample]:
        """An instant query at the server's now: each series and its value (a scalar result is
        one series with no labels)."""
        response = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        answer = response.json()
        assert answer.get("status") == "success", f"{expr}: {response.text}"
        data = answer["data"]
        if data["resultType"] in ("scalar", "string"):
            return [({}, float(data["result"][1]))]
        assert data["resultType"] == "vector", f"{expr}: {response.text}"
        return [(series["metric"], float(series["value"][1])) for series in data["result"]]

    def value(self, expr: str) -> float | None:
        """The value of a query that yields at most one series (``None``: none)."""
        samples = self.query(expr)
        assert len(samples) <= 1, f"{expr} gave {len(samples)} series: {samples}"
        return samples[0][1] if samples else None

    def by(self, metric: str, *labels: str) -> dict[tuple[str, ...], float]:
        """Every series of ``metric`` this job scraped, keyed by the values of ``labels`` (a
        label a series lacks reads as ""); series that share those values are added up."""
        values: dict[tuple[str, ...], float] = {}
        for series, value in self.query(f'{metric}{{job="{self.job}"}}'):
            key = tuple(series.get(label, "") for label in labels)
            values[key] = values.get(key, 0.0) + value
        return values

    def scraped_since(self, moment: float, *, timeout: float = 20) -> None:
        """Wait until a scrape that began after ``moment`` (``time.time()``) succeeded and is
        stored: what the target served then is what a query now sees."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            samples = self.query(f'up{{job="{self.job}"}}')
            stamp = self.value(f'timestamp(up{{job="{self.job}"}})')
            if samples and samples[0][1] == 1 and stamp is not None and stamp > moment:
                return
            time.sleep(0.2)
        pytest.fail(
            f"Prometheus did not scrape the {self.job!r} job within {timeout} s: {self.target()}",
            pytrace=False,
        )

    def target(self) -> dict[str, Any]:
        """The job's target as ``/api/v1/targets`` reports it (its health, last error)."""
        answer = httpx.get(f"{self.url}/api/v1/targets", timeout=10).json()
        for target in answer["data"]["activeTargets"]:
            if target["labels"].get("job") == self.job:
                return dict(target)
        return {}


@contextmanager
def prometheus(
    directory: Path,
    target: str,
    *,
    metrics_path: str = "/metrics",
    bearer_token: str | None = None,
    job: str = "bridge",
) -> Iterator[Prometheus]:
    """Prometheus scraping ``http://{target}{metrics_path}`` (``target``: host:port) every
    second, sending ``Authorization: Bearer {bearer_token}`` when one is given; its config, store
    and log in ``directory``. Stopped when the block ends."""
    program = require_prometheus()
    scrape: dict[str, Any] = {
        "job_name": job,
        "metrics_path": metrics_path,
        "static_configs": [{"targets": [target]}],
    }
    if bearer_token is not None:
        scrape["authorization"] = {"type": "Bearer", "credentials": bearer_token}
    interval = f"{SCRAPE_INTERVAL}s"
    config = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval},
        "scrape_configs": [scrape],
    }
    config_file = directory / "prometheus.yml"
    config_file.write_text(json.dumps(config, indent=2), encoding="utf-8")  # JSON is YAML
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = directory / "prometheus.log"
    command = [
        program,
        f"--config.file={config_file}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    try:
        _wait_ready(url, process, log)
        yield Prometheus(url, job, log)
    finally:
        stop(process)


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    said = log.read_text(encoding="utf-8", errors="replace")[-4000:]
    pytest.fail(f"Prometheus did not become ready at {url}:\n{said}", pytrace=False)
