"""Reads schemathesis' NDJSON event stream (`--report ndjson`) and prints one result per API
operation of openapi.yaml, plus one for the stateful phase (chains of calls along the API
links), as "ok - ..." / "not ok - ...: reason", then a "# schemathesis: ..." totals line.

Run by scripts/test-api:  python summarize_schemathesis.py EVENTS.ndjson OPENAPI_YAML MIN_REQUESTS

Exits 1 when anything failed, an operation was not tested, schemathesis reported an error,
or fewer than MIN_REQUESTS requests were sent in all.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict

import yaml

events_path, spec_path, min_requests = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(spec_path, encoding="utf-8") as spec_file:
    spec = yaml.safe_load(spec_file)
STATEFUL = "Stateful tests"
labels = [f"{method.upper()} {path}" for path, item in spec["paths"].items() for method in item]

requests_by: Counter[str] = Counter()
checks_by: defaultdict[str, Counter[str]] = defaultdict(Counter)
failed_checks_by: defaultdict[str, Counter[str]] = defaultdict(Counter)
statuses_by: defaultdict[str, Counter[str]] = defaultdict(Counter)
errors: list[str] = []
running_time = 0.0
stop_reason = "unknown"

with open(events_path, encoding="utf-8") as events:
    for line in events:
        event = json.loads(line)
        kind, data = next(iter(event.items()))
        if kind == "ScenarioFinished":
            label = data["recorder"]["label"]
            statuses_by[label][data["status"]] += 1
            requests_by[label] += len(data["recorder"].get("interactions") or {})
            for checks in (data["recorder"].get("checks") or {}).values():
                for check in checks:
                    checks_by[label][check["status"]] += 1
                    if check["status"] != "success":
                        failed_checks_by[label][check["name"]] += 1
        elif kind == "EngineFinished":
            running_time = data.get("running_time", 0.0)
            stop_reason = data.get("stop_reason", "unknown")
        elif "Error" in kind:
            errors.append(f"{kind}: {json.dumps(data)[:300]}")

passed = failed = 0
for label in [*labels, STATEFUL]:
    name = (
        f"schemathesis {label}"
        if label != STATEFUL
        else "schemathesis stateful phase (calls chained along the API links)"
    )
    checks = checks_by[label]
    summary = f"{requests_by[label]} requests, {sum(checks.values())} checks"
    problems = []
    if requests_by[label] == 0:
        problems.append("no request was sent")
    if failed_checks_by[label]:
        problems.append("failed checks: " + ", ".join(f"{n} x{c}" for n, c in sorted(failed_checks_by[label].items())))
    bad_scenarios = {s: c for s, c in statuses_by[label].items() if s not in ("success", "skip")}
    if bad_scenarios and not failed_checks_by[label]:
        problems.append("scenarios " + ", ".join(f"{s} x{c}" for s, c in sorted(bad_scenarios.items())))
    if problems:
        failed += 1
        print(f"not ok - {name}: {summary}; {'; '.join(problems)}")
    else:
        passed += 1
        print(f"ok - {name} ({summary})")

unknown = sorted(set(requests_by) - set(labels) - {STATEFUL})
total_requests = sum(requests_by.values())
total_checks = sum(sum(c.values()) for c in checks_by.values())
failed_total = sum(sum(c.values()) for c in failed_checks_by.values())
if unknown:
    failed += 1
    print(f"not ok - schemathesis tested only documented operations: also {', '.join(unknown)}")
if errors:
    failed += 1
    print(f"not ok - schemathesis ran without errors: {len(errors)}, first: {errors[0]}")
if total_requests < min_requests:
    failed += 1
    print(f"not ok - schemathesis sent at least {min_requests} requests: only {total_requests}")
else:
    passed += 1
    print(f"ok - schemathesis sent at least {min_requests} requests ({total_requests})")
print(
    f"# schemathesis: {total_requests} requests, {total_checks} checks "
    f"({total_checks - failed_total} passed, {failed_total} failed), {len(labels)} operations, "
    f"{running_time:.0f} s, stop reason: {stop_reason}"
)
sys.exit(1 if failed else 0)
