#!/usr/bin/python3
"""sim_pad.py: which padding rule for wal.fsync=always (wal/pad.c), on a page model.

    bench/sim_pad.py [--rounds 20000] [--record 141] [--page 4096] [--seed 1]

The model is the one docs/WAL.md ("Flash wear") measures: every round (the
records one fdatasync covers) is one append; each page it touches goes from
clean to dirty once and is written once (Linux's write_bytes), including a
page an earlier fdatasync already wrote. A rule may end a round with a
padding record up to the next page boundary (at least 28 bytes: a gap under
that cannot be padded). Printed per rule and round-length distribution:
bytes written / record bytes, then bytes on disk / record bytes.

It is a model, not a measurement: bench/bench_wal.c (paced) and
bench/bench_wear.py (the real gateway) measure the chosen rule. Nothing
here passes or fails.
"""
import argparse
import random

HEAD = 28


def run(lens, rule, page):
    pos = written = records = 0
    for n in lens:
        start, end = pos, pos + n
        records += n
        fill = end % page
        pad = page - fill if fill else 0
        if pad < HEAD or not rule(fill, n, page):
            pad = 0
        end += pad
        written += ((end - 1) // page - start // page + 1) * page
        pos = end
    return written / records, pos / records


def crosses(fill, n, page):
    """a next round of exactly n bytes would spill into a fresh page"""
    return (fill + n + page - 1) // page > (n + page - 1) // page


RULES = {
    "no padding": lambda f, n, a: False,
    "pad always": lambda f, n, a: True,
    "pad if f > A/2": lambda f, n, a: f > a / 2,
    "pad < data": lambda f, n, a: a - f < n,
    "spill-only": crosses,
    "pad < min(data, A/2)": lambda f, n, a: a - f < min(n, a / 2),
    "pad < min(data/2, A/2) (wal)": lambda f, n, a: a - f < min(n / 2, a / 2),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=20000)
    ap.add_argument("--record", type=int, default=141)
    ap.add_argument("--page", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    r, n = a.record, a.rounds
    dists = {
        "100, fixed": [100 * r] * n,
        "~77, exponential": [max(1, int(rnd.expovariate(1 / 77))) * r for _ in range(n)],
        "77 +- 10, normal": [max(1, int(rnd.gauss(77, 10))) * r for _ in range(n)],
        "1..150, uniform": [rnd.randint(1, 150) * r for _ in range(n)],
        "~39, exponential": [max(1, int(rnd.expovariate(1 / 39))) * r for _ in range(n)],
        "~20, exponential": [max(1, int(rnd.expovariate(1 / 20))) * r for _ in range(n)],
        "10, fixed": [10 * r] * n,
        "3, fixed": [3 * r] * n,
        "1, fixed": [r] * n,
    }
    print(f"bytes written / record bytes, bytes on disk / record bytes; {r}-byte records, "
          f"page {a.page}, {n} rounds per row")
    print()
    print("| messages per round | " + " | ".join(RULES) + " |")
    print("|---|" + "--:|" * len(RULES))
    for name, lens in dists.items():
        cells = ["%.2f / %.2f" % run(lens, rule, a.page) for rule in RULES.values()]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
