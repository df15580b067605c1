"""Database engine, sessions and migrations (Alembic, shipped inside the package)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets foreign keys on and a busy timeout (the API and a
    local worker may write at the same time)."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(conn, _record) -> None:  # pragma: no cover - trivial
            cur = conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """Sessions that keep loaded attributes after commit (handy in request handlers)."""
    return sessionmaker(engine, expire_on_commit=False)


@contextlib.contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session whose work is committed on success and rolled back on error."""
    with factory() as session, session.begin():
        yield session


def alembic_config(url: str):
    """An Alembic config pointing at the packaged migrations and ``url``."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` to ``revision`` (creates the tables on an empty one)."""
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def deployment_id(sessions: sessionmaker[Session]) -> str:
    """This platform's deployment id (``platform_meta``; migration 0004 makes it). Raises
    ``RuntimeError`` when the database has none: run ``python -m liberopro_platform db-upgrade``."""
    from liberopro_platform.models import PlatformMeta

    with sessions() as s:
        row = s.get(PlatformMeta, "deployment_id")
    if row is None:
        raise RuntimeError("the database holds no deployment id: run `python -m liberopro_platform db-upgrade`")
    return row.value
