#!/bin/bash
python3 - <<'PY'
import csv
values, dates, sensors = {}, set(), set()
with open("readings.csv", newline="") as f:
    for row in csv.DictReader(f):
        values[row["date"], row["sensor"]] = row["value"]
        dates.add(row["date"])
        sensors.add(row["sensor"])
with open("wide.csv", "w", newline="") as f:
    out = csv.writer(f, lineterminator="\n")
    out.writerow(["date", *sorted(sensors)])
    for d in sorted(dates):
        out.writerow([d, *(values.get((d, s), "") for s in sorted(sensors))])
PY
