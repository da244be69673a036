"""Write generated scenarios (``simulator/generate.py``) as YAML files, one per seed.

    python bench/generate.py --seeds 1..40 --out /tmp/generated     # or --seeds 3 7 12
    python bench/generate.py --seeds 1..5 --contention tight --out /tmp/tight
    python bench/generate.py --seeds 1..12 --regions --out /tmp/regions   # multi-region

Each file is ``<out>/<name>.yaml`` (``gen-<seed>``, ``gen-<seed>-tight``,
``gen-regions-<seed>``: ``simulator/generate_regions.py``); a recorded trace
it replays is named relative to ``<out>`` when that is near the checkout, else by its
absolute path.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse_seeds(words: list[str]) -> list[int]:
    """``1..40`` (inclusive ranges) and single seeds, in order, without repeats."""
    out: list[int] = []
    for w in words:
        lo, sep, hi = w.partition("..")
        try:
            seeds = range(int(lo), int(hi) + 1) if sep else [int(w)]
        except ValueError:
            raise argparse.ArgumentTypeError(f"--seeds: {w!r} is neither N nor A..B") from None
        if any(s < 0 for s in seeds) or (sep and int(hi) < int(lo)):
            raise argparse.ArgumentTypeError(f"--seeds: {w!r}: seeds are >= 0, ranges A..B "
                                             "with A <= B")
        out.extend(s for s in seeds if s not in out)
    return out


def main() -> None:
    import yaml

    from simulator.generate import CONTENTION, generate, relocate
    from simulator.generate_regions import generate_regions
    from simulator.scenario import parse_scenario

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", nargs="+", default=["1..10"], help="N or A..B (inclusive)")
    ap.add_argument("--out", type=Path, required=True, help="directory to write to")
    ap.add_argument("--contention", choices=CONTENTION, default=None,
                    help="the generator's contention option (default: drawn from the seed)")
    ap.add_argument("--regions", action="store_true", help="draw multi-region scenarios "
                    "(simulator/generate_regions.py) instead")
    args = ap.parse_args()
    if args.regions and args.contention is not None:
        ap.error("--regions and --contention: the multi-region generator has no contention "
                 "option")
    try:
        seeds = parse_seeds(args.seeds)
    except argparse.ArgumentTypeError as exc:
        ap.error(str(exc))
    args.out.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        doc = relocate(generate_regions(seed) if args.regions
                       else generate(seed, args.contention), args.out)
        path = args.out / f"{doc['name']}.yaml"
        parse_scenario(doc, str(path), args.out)      # every file written is valid
        option = (" --regions" if args.regions else "" if args.contention is None
                  else f" --contention {args.contention}")
        path.write_text(f"# python bench/generate.py --seeds {seed}{option}\n"
                        + yaml.safe_dump(doc, sort_keys=False, width=100))
        print(f"{path}: {doc['description']}")


if __name__ == "__main__":
    main()
