"""A Prometheus scrape as ``{'name{label="v"}': value}`` and the exact-name reads of it that every
engine's counters use."""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

MetricSamples = dict[str, float]


def parse_metrics(text: str) -> MetricSamples:
    """Prometheus text → ``{'name{label="v"}': value}`` with prometheus_client's parser."""
    out: MetricSamples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = float(sample.value)
    return out


_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def series(samples: MetricSamples, name: str) -> list[tuple[dict[str, str], float]]:
    """Every label set of the metric called exactly ``name``, with its labels parsed back.

    Exact-name matching is the point: prometheus_client emits a ``<name>_created`` sample next to
    every ``<name>_total`` (vLLM Prometheus metrics), and ``..._accepted_tokens_per_pos_total`` shares a
    prefix with ``..._accepted_tokens_total``; neither may leak into a total.
    """
    out = []
    for key, value in samples.items():
        metric, _, rest = key.partition("{")
        if metric == name:
            out.append((dict(_LABEL.findall(rest)), value))
    return out


def sum_series(samples: MetricSamples, name: str) -> float | None:
    """Sum of a counter over all its label sets (DP engines, ranks); None if absent."""
    found = series(samples, name)
    return sum(v for _, v in found) if found else None
