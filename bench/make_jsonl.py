#!/usr/bin/env python3
"""Writes a deterministic synthetic JSONL corpus for bench_preprocess.sh.

  python3 bench/make_jsonl.py OUT.jsonl MEGABYTES SOURCE.txt [SOURCE.txt ...]

Documents are 200..6000-byte runs of words drawn (seeded) from the sources'
word list with their real frequency, with line breaks, numbers and a few
non-ASCII words, so the BPE word cache sees a realistic hit rate instead of
the same text over and over.
"""
import json, random, sys

out, megabytes, sources = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
words = []
for s in sources:
    with open(s, encoding="utf-8", errors="ignore") as f:
        words += f.read().split()
extra = ["café", "naïve", "日本語", "Привет", "😀", "γειά", "2024-01-01", "3.14159", "don't", "it's"]
rng = random.Random(1234)
target = int(megabytes * 1e6)
written = 0
with open(out, "w", encoding="utf-8") as f:
    while written < target:
        n = rng.randint(200, 6000)
        parts, size = [], 0
        while size < n:
            w = rng.choice(extra) if rng.random() < 0.01 else rng.choice(words)
            if rng.random() < 0.02:
                w = str(rng.randint(0, 100000))
            sep = "\n" if rng.random() < 0.08 else " "
            parts.append(w + sep)
            size += len(w) + 1
        line = json.dumps({"text": "".join(parts)}, ensure_ascii=False) + "\n"
        f.write(line)
        written += len(line.encode("utf-8"))
