"""Alembic's entry point for podium's store: migrations run on the connection that
:func:`podium.store.engine.upgrade` passes in (``config.attributes["connection"]``)."""

from alembic import context

from podium.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",  # ALTER TABLE on SQLite: copy-and-move
)
with context.begin_transaction():
    context.run_migrations()
