"""Users' API keys for `longdoc serve` (app/services/api_keys.py), seen from the server: who a
key belongs to, read from the database for each request (nothing cached: a revoked key or a
disabled user is refused from the next request), and one audit row per request made with one,
written on a thread of its own so that no request waits for it."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sqlalchemy import Engine

from app import migrate
from app.db.session import make_engine, session_factory, sqlite_file
from app.errors import AppError
from app.services import api_keys
from app.settings import Settings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeyOwner:
    """A user's key that a request came with (ids and the user's name, never the secret)."""

    key_id: int
    user_id: int
    user_name: str


class UserKeys:
    """The database's API keys, for one server."""

    def __init__(self, engine: Engine, origin: str) -> None:
        self._engine, self._origin = engine, origin[:100]
        self._sessions = session_factory(engine)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="serve-audit")

    @classmethod
    def open(cls, settings: Settings, origin: str) -> UserKeys | None:
        """The keys of the configured database; None when it has none to give (no database
        file, not reachable, or not migrated to the newest revision)."""
        path = sqlite_file(settings.database_url)
        if path is not None and not path.exists():
            return None
        engine = make_engine(settings.database_url)
        try:
            migrate.require_head(engine)
        except AppError as error:
            logger.warning("users' API keys are not used: %s", error)
            engine.dispose()
            return None
        return cls(engine, origin)

    def owner(self, secret: str) -> KeyOwner | None:
        """Whose working key `secret` is; None for any other secret."""
        with self._sessions() as session:
            found = api_keys.active_key(session=session, secret=secret)
            if found is None:
                return None
            key, user = found
            return KeyOwner(key_id=key.id, user_id=user.id, user_name=user.name)

    def has_any(self) -> bool:
        """Whether some enabled user has a working key (a keyless server then asks for one)."""
        with self._sessions() as session:
            return api_keys.has_active_keys(session=session)

    def record(
        self, owner: KeyOwner, *, outcome: str, num_prompt_tokens: int, num_completion_tokens: int
    ) -> None:
        """Queue the request's audit row; it is written after the answer, on the writer thread."""
        try:
            self._writer.submit(
                self._write, owner, outcome, num_prompt_tokens, num_completion_tokens
            )
        except RuntimeError:  # closed: the server is stopping
            logger.error("an API request's audit row was not written: the server has stopped")

    def _write(self, owner: KeyOwner, outcome: str, num_prompt: int, num_completion: int) -> None:
        try:
            with self._sessions() as session:
                api_keys.record_request(
                    session=session,
                    key_id=owner.key_id,
                    user_id=owner.user_id,
                    user_name=owner.user_name,
                    origin=self._origin,
                    outcome=outcome,
                    num_prompt_tokens=num_prompt,
                    num_completion_tokens=num_completion,
                )
                session.commit()
        except Exception as error:  # the answer went out; the log must not take the server down
            logger.error("an API request's audit row was not written: %s", type(error).__name__)

    def close(self) -> None:
        """Write the queued audit rows, then let the database go."""
        self._writer.shutdown(wait=True)
        self._engine.dispose()
