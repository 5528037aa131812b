"""podium's shared store: the databases that processes share (SQLite by default, PostgreSQL by
URL), their schema and migrations, and the shared budget ledger.

``podium.store.engine`` opens connections (the one place), ``podium.store.schema`` declares the
tables, ``podium.store.ledger`` keeps period budgets in them, ``podium.store.cli`` is
``podium db upgrade | check``.
"""
