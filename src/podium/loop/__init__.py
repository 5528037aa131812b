"""``podium loop``: from traffic to a better conductor as one command (docs/loop.md).

- :mod:`podium.loop.runner` — ``podium loop run``: the checks before anything is written, then
  the stages in order, each recorded as it ends.
- :mod:`podium.loop.stages` — 1 drift, 2 export and the review file, 3 labels;
  :mod:`podium.loop.outcomes` — 4 record, 5 train, 6 promote. Each runs the code of the command
  it stands for (``podium drift``, ``podium tasks export``, …).
- :mod:`podium.loop.state` — the folder, ``loop.json``, the lock; :mod:`podium.loop.settings` —
  the remembered options; :mod:`podium.loop.report` — a run's report and ``podium loop status``.
"""

__all__: list[str] = []
