"""Reading a Prometheus text body (``GET /metrics``) in tests."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def sample(body: str, name: str, **labels: str) -> float | None:
    """The value of one sample of a Prometheus text body (labels: a subset to match), None if absent."""
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return None
