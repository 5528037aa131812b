"""How masking time grows with the number of values a request's vault holds (docs/pii.md).

The outside re-test 17 text: ``n`` Danish phone numbers (``NN NN NN NN``) after "Ring", all of
them already in the vault, as in a later step of a request whose question listed them. Per size
it prints the known-value pass (:func:`podium.pii.known.known_values`: seconds and its work count
per character of text, which stays flat when the pass is linear) and, with ``--mask``, a whole
:meth:`podium.pii.mask.Pseudonymizer.mask` (detection included).

    PYTHONPATH=src python bench/pii_scaling.py
    PYTHONPATH=src python bench/pii_scaling.py --mask --sizes 500,1000,2000,4000
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from podium.pii.known import WorkCount, known_values
from podium.pii.vault import Vault


def phone_text(n: int, seed: int = 0) -> tuple[str, list[str]]:
    """("Ring n1, ring n2, …", the numbers): ``n`` Danish numbers written NN NN NN NN."""
    rng = random.Random(seed)
    numbers = [" ".join(str(rng.randint(a, 99)) for a in (20, 10, 10, 10)) for _ in range(n)]
    return "Ring " + ", ring ".join(numbers) + ".", numbers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default="500,1000,2000,4000,6500", help="numbers per text, comma-separated")
    parser.add_argument("--mask", action="store_true", help="also time a whole mask (loads Presidio)")
    args = parser.parse_args(argv)
    pseudonymizer = None
    if args.mask:
        from podium.pii.detect import Detector
        from podium.pii.mask import Pseudonymizer

        detector = Detector()
        detector.warm_up()
        pseudonymizer = Pseudonymizer(detector)
    print("| values | characters | known-value pass, s | work per character | whole mask, s |")
    print("|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.sizes.split(",")):
        text, numbers = phone_text(n)
        vault = Vault()
        for number in numbers:
            vault.placeholder("PHONE_NUMBER", number)
        work = WorkCount()
        started = time.perf_counter()
        found = known_values(text, vault, work)
        known_s = time.perf_counter() - started
        assert len(found) >= n, (len(found), n)
        whole = "—"
        if pseudonymizer is not None:
            started = time.perf_counter()
            masked, _ = pseudonymizer.mask(text, vault)
            whole = f"{time.perf_counter() - started:.2f}"
            assert not any(number in masked for number in numbers)
        print(f"| {n:,} | {len(text):,} | {known_s:.2f} | {work.total / len(text):.2f} | {whole} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
