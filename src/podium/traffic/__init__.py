"""From traffic to a better conductor: regression sets from stored traffic, the labelling round
trip, and drift monitoring (docs/loop.md).

- :mod:`podium.traffic.source` — traces and shadow records as :class:`TrafficItem` s.
- :mod:`podium.traffic.export` — ``podium tasks export``: pseudonymized, de-duplicated
  regression sets with candidate references.
- :mod:`podium.traffic.review` — the review file out and its verdicts back in
  (``podium tasks import``); :mod:`podium.traffic.label` — candidates confirmed by a judge
  worker (``podium tasks label --judge``).
- :mod:`podium.traffic.drift` and :mod:`podium.traffic.plot` — ``podium drift``.
- :mod:`podium.traffic.features` — normalised text, terms, language, format, a model-free
  embedding.

Importing this package is light: numpy, Presidio and matplotlib load in the modules that use
them.
"""

from podium.traffic.source import TrafficItem

__all__ = ["TrafficItem"]
