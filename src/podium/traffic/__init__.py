"""From traffic to a better conductor: regression sets from stored traffic.

- :mod:`podium.traffic.source` — traces and shadow records as :class:`TrafficItem` s.
- :mod:`podium.traffic.export` — ``podium tasks export``: pseudonymized, de-duplicated
  regression sets with candidate references.
- :mod:`podium.traffic.features` — normalised text, terms, language, format, a model-free
  embedding.

Importing this package is light: numpy and Presidio load in the modules that use them.
"""

from podium.traffic.source import TrafficItem

__all__ = ["TrafficItem"]
