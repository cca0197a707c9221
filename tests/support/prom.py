"""Scraping helpers for the metrics tests: fetch /metrics, parse it with prometheus_client's own
parser, and look samples up by name and a subset of their labels."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families


@dataclass
class Scrape:
    text: str
    families: dict[str, object]

    def family(self, name: str):
        """The family ``name`` (counters by their name without ``_total``, as the parser gives it)."""
        fam = self.families.get(name) or self.families.get(name.removesuffix("_total"))
        assert fam is not None, f"metric family {name} missing; have {sorted(self.families)}"
        return fam

    def samples(self, name: str, **labels: str) -> list:
        """Samples named ``name`` whose labels include ``labels``."""
        out = []
        for fam in self.families.values():
            for sample in fam.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    out.append(sample)
        return out

    def value(self, name: str, default: float | None = None, **labels: str) -> float:
        found = self.samples(name, **labels)
        if not found:
            if default is not None:
                return default
            raise AssertionError(f"no sample {name}{labels}")
        assert len(found) == 1, f"{name}{labels} matches {len(found)} samples: {found}"
        return found[0].value

    def total(self, name: str, **labels: str) -> float:
        return sum(s.value for s in self.samples(name, **labels))


def get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    """(status, body) of a GET; HTTP errors are returned, not raised."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8")


def scrape(host_port: str) -> Scrape:
    status, text = get(f"http://{host_port}/metrics")
    assert status == 200, (status, text)
    families = list(text_string_to_metric_families(text))
    names = [f.name for f in families]
    assert len(names) == len(set(names)), f"a family appears twice: {names}"
    series = [(x.name, tuple(sorted(x.labels.items()))) for f in families for x in f.samples]
    assert len(series) == len(set(series)), "duplicate series (Prometheus rejects such a scrape)"
    return Scrape(text, {f.name: f for f in families})


def wait_ready(host_port: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    body = ""
    while time.monotonic() < deadline:
        try:
            status, body = get(f"http://{host_port}/ready", timeout=2)
            if status == 200:
                return body
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{host_port} not ready: {body}")
