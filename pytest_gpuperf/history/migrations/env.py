"""Alembic's environment for the history store: run on the connection ``store.py`` hands over.

Migrations are applied programmatically when a store is opened (``store.open_store``), inside
its transaction and lock; there is no ``alembic.ini``. To write a new revision, change
``schema.py`` and add a numbered file under ``versions/`` by hand or with
``alembic revision`` pointed at this folder.
"""

from __future__ import annotations

from alembic import context

from pytest_gpuperf.history.schema import VERSION_TABLE, metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
