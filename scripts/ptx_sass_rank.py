#!/usr/bin/env python3
"""Do PTX instruction counts rank source regions as SASS counts do? (divergence meter weights)

Usage: ptx_sass_rank.py ENTRY_DIR [NVDISASM]

ENTRY_DIR is a cuda kernel cache entry (module.ptx, module.sm_90.cubin, built with line info, as
GBX builds them). NVDISASM defaults to `nvdisasm` on PATH (PyPI: nvidia-cuda-nvdisasm). Counts
instructions per source line in the PTX (.loc) and in the SASS (nvdisasm -g), sums them per
template file, and prints Spearman's rank correlation over the SM83 family templates
(templates/sm83/family/*.tmpl: the opcode bodies) and over their lines.
See docs/internals/divergence.md "Weights".
"""

import collections
import re
import subprocess
import sys
from pathlib import Path


def ptx_counts(path):
    text = Path(path).read_text().splitlines()
    files = {}
    for line in text:
        m = re.match(r'\.file\s+(\d+)\s+"([^"]+)"', line.strip())
        if m:
            files[m.group(1)] = m.group(2)
    counts = collections.Counter()
    cur = None
    for line in text:
        t = line.strip()
        m = re.match(r"\.loc\s+(\d+)\s+(\d+)", t)
        if m:
            cur = (files.get(m.group(1), m.group(1)), int(m.group(2)))
            continue
        if not t or t.startswith((".", "//", "{", "}", "$")) or not t.endswith(";"):
            continue
        if cur:
            counts[cur] += 1
    return counts


def sass_counts(cubin, nvdisasm):
    out = subprocess.run([nvdisasm, "-g", "-c", cubin], capture_output=True, text=True, check=True)
    counts = collections.Counter()
    cur = None
    for line in out.stdout.splitlines():
        m = re.search(r'//## File "([^"]+)", line (\d+)', line)
        if m:
            cur = (m.group(1), int(m.group(2)))
        elif cur and re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+\S", line):
            counts[cur] += 1
    return counts


def ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va and vb else float("nan")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.split("\n\n")[1])
    entry = Path(sys.argv[1])
    nvdisasm = sys.argv[2] if len(sys.argv) == 3 else "nvdisasm"
    for f in ("module.ptx", "module.sm_90.cubin"):
        if not (entry / f).is_file():
            sys.exit(f"ptx_sass_rank: {entry / f} does not exist (a cuda cache entry for sm_90?)")
    pc = ptx_counts(entry / "module.ptx")
    sc = sass_counts(entry / "module.sm_90.cubin", nvdisasm)
    per_file_p, per_file_s = collections.Counter(), collections.Counter()
    for k, v in pc.items():
        per_file_p[k[0]] += v
    for k, v in sc.items():
        per_file_s[k[0]] += v
    fams = sorted(k for k in set(per_file_p) | set(per_file_s) if "/family/" in k)
    lines = sorted(k for k in set(pc) | set(sc) if "/family/" in k[0])
    rho_f = spearman([per_file_p[k] for k in fams], [per_file_s[k] for k in fams])
    rho_l = spearman([pc[k] for k in lines], [sc[k] for k in lines])
    print(f"family templates: {len(fams)}, Spearman(ptx, sass) {rho_f:.3f}")
    print(f"family template lines: {len(lines)}, Spearman(ptx, sass) {rho_l:.3f}")
    print(f"instructions with a line: ptx {sum(pc.values())}, sass {sum(sc.values())}")


if __name__ == "__main__":
    main()
