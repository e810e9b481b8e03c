#!/usr/bin/env python3
"""Keeps README.md short and true (run by scripts/docs.sh, so by CI):

- at most 250 lines, its first code block the two set-up commands (demo.sh, test.sh);
- every relative link points at a file of the repository;
- the public-suite counts it quotes equal those of tests/data/public_suites.tsv (the file
  test_public_suites holds the suites to), so the numbers cannot go stale.
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

# Suite counts: "mooneye 91/91, blargg 34/43, dmg-acid2 1/1, Mealybug 1/24".
passed: Counter[str] = Counter()
total: Counter[str] = Counter()
for row in (root / "tests/data/public_suites.tsv").read_text().splitlines():
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
quoted = dict(re.findall(r"(mooneye|blargg|dmg-acid2|Mealybug) (\d+/\d+)", readme))
for suite in total:
    want = f"{passed[suite]}/{total[suite]}"
    if suite not in quoted:
        errors.append(f"README.md does not quote the {suite} count ({want})")
    elif quoted[suite] != want:
        errors.append(
            f"README.md says {suite} {quoted[suite]}, tests/data/public_suites.tsv says {want}"
        )

if errors:
    print("\n".join(f"check_readme: {e}" for e in errors), file=sys.stderr)
    sys.exit(1)
print(f"check_readme: README.md {len(lines)} lines, links and suite counts true")
