#!/usr/bin/env python3
"""Keeps README.md short and true (run by scripts/docs.sh, so by CI):

- at most 250 lines, its first code block the two set-up commands (demo.sh, test.sh);
- every relative link points at a file of the repository;
- the public-suite counts it quotes equal those test_public_suites holds the suites to, so
  the numbers cannot go stale: the default pixel model's (fifo: tests/data/public_suites_fifo.tsv;
  blargg's ROMs draw nothing, so theirs are the line file's) and, after `line renderer:`, the
  line model's Mealybug count (tests/data/public_suites.tsv).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

root = Path(__file__).resolve().parent.parent
readme = (root / "README.md").read_text()
errors: list[str] = []

lines = readme.splitlines()
if len(lines) > 250:
    errors.append(f"README.md has {len(lines)} lines (at most 250: move the detail into docs/)")
blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
commands = [c for c in (blocks[0].splitlines() if blocks else []) if c and not c.startswith("#")]
if commands != ["scripts/demo.sh", "scripts/test.sh"]:
    errors.append(f"README.md's first code block must be the two set-up commands, found {commands}")

for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme):
    if "://" in target:
        continue
    if not (root / target).exists():
        errors.append(f"README.md links to {target}, which does not exist")


# Suite counts: "mooneye 91/91, blargg 42/43, dmg-acid2 1/1, Mealybug 24/24 (line renderer:
# Mealybug 1/24)".
def suite_counts(tsv: str) -> dict[str, str]:
    passed: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for row in (root / "tests/data" / tsv).read_text().splitlines():
        if not row or row.startswith("#"):
            continue
        rom, verdict = row.split("\t")[:2]
        suite = {"mooneye": "mooneye", "blargg": "blargg", "mealybug": "Mealybug"}.get(
            rom.split("/")[0], "dmg-acid2" if "acid2" in rom else rom.split("/")[0]
        )
        if verdict == "SKIP":
            continue
        total[suite] += 1
        passed[suite] += verdict == "PASS"
    return {suite: f"{passed[suite]}/{total[suite]}" for suite in total}


line = suite_counts("public_suites.tsv")
default = {**line, **suite_counts("public_suites_fifo.tsv")}
line_quote = re.search(r"line renderer: Mealybug (\d+/\d+)", readme)
if not line_quote:
    errors.append(
        f"README.md does not quote the line renderer's count (Mealybug {line['Mealybug']})"
    )
elif line_quote.group(1) != line["Mealybug"]:
    errors.append(
        f"README.md says line renderer: Mealybug {line_quote.group(1)}, "
        f"tests/data/public_suites.tsv says {line['Mealybug']}"
    )
rest = readme.replace(line_quote.group(0), "") if line_quote else readme
quoted = dict(re.findall(r"(mooneye|blargg|dmg-acid2|Mealybug|gbmicrotest) (\d+/\d+)", rest))
for suite, want in default.items():
    if suite not in quoted:
        errors.append(f"README.md does not quote the {suite} count ({want})")
    elif quoted[suite] != want:
        errors.append(f"README.md says {suite} {quoted[suite]}, the expectations files say {want}")

if errors:
    print("\n".join(f"check_readme: {e}" for e in errors), file=sys.stderr)
    sys.exit(1)
print(f"check_readme: README.md {len(lines)} lines, links and suite counts true")
