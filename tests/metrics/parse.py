"""Parses the gateway's /metrics with the Prometheus project's own Python client (PyPI
`prometheus-client`), as a scraper would: its OpenMetrics parser is strict (types, names,
label syntax, the closing `# EOF`) and raises on anything else.

Reads the text on stdin; prints one JSON object per sample:
{"family", "type", "name", "labels", "value"}.
Usage: python parse.py < metrics.txt
"""

import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        print(json.dumps({
            "family": family.name,
            "type": family.type,
            "name": s.name,
            "labels": s.labels,
            "value": s.value,
        }))
