"""How fast tomrl generates labelled ToM data and answers belief queries.

    .venv/bin/python benchmarks/bench_generate.py            # 10,000 Hi-ToM questions (the issue's target)
    .venv/bin/python benchmarks/bench_generate.py --n 2000   # quicker

Prints examples per second for 10,000 Hi-ToM questions (default mix: orders 0-4, deception
on/off, 1-3 chapters; every label re-derived from the story text as part of generation), the same
number asked five per story, ToMi, and belief-oracle queries per second (every chain of one to four
agents about a story's object), side by side in one run. Single process, wall-clock time.
"""

from __future__ import annotations

import argparse
import platform
import time
from itertools import permutations


def _timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="questions per generation run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig
    from tomrl.world.oracle import BeliefOracle
    from tomrl.world.parsers import parse_hitom_story

    n = args.n
    runs = [
        ("Hi-ToM, 1 question per story (default mix)", GenerateConfig(n=n, seed=args.seed)),
        ("Hi-ToM, 5 questions per story", GenerateConfig(n=n, stories=-(-n // 5), seed=args.seed)),
        ("ToMi, 6 questions per story", GenerateConfig(benchmark="tomi", n=n, stories=-(-n // 6), seed=args.seed)),
    ]
    print(f"python {platform.python_version()} on {platform.machine()}, seed {args.seed}")
    print(f"{'run':<46} {'examples':>9} {'seconds':>8} {'examples/s':>11}")
    rates = {}
    hitom_examples = None
    for name, cfg in runs:
        examples, seconds = _timed(lambda cfg=cfg: generate(cfg))
        rates[name] = len(examples) / seconds
        if hitom_examples is None:
            hitom_examples = examples
        print(f"{name:<46} {len(examples):>9} {seconds:>8.2f} {rates[name]:>11.0f}")

    stories = list({e.story_id: e for e in hitom_examples}.values())[:1000]
    oracles, build_seconds = _timed(lambda: [BeliefOracle(parse_hitom_story(e.story)) for e in stories])
    queries = 0

    def ask_all():
        nonlocal queries
        for oracle, example in zip(oracles, stories):
            obj = example.meta["query"]["object"]
            for k in range(1, 5):
                for chain in permutations(example.meta["agents"], k):
                    oracle.belief(chain, obj)
                    queries += 1

    _, query_seconds = _timed(ask_all)
    print(f"{'parse + build oracle from story text':<46} {len(stories):>9} {build_seconds:>8.2f} {len(stories) / build_seconds:>11.0f}  stories/s")
    print(f"{'belief queries, every chain of 1-4 agents':<46} {queries:>9} {query_seconds:>8.2f} {queries / query_seconds:>11.0f}  queries/s")
    first, second = runs[0][0], runs[1][0]
    print(f"ratio: 5 questions per story vs 1 per story: {rates[second] / rates[first]:.2f}x examples/s")


if __name__ == "__main__":
    main()
