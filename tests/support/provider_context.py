"""ProviderContexts for provider unit tests: pointed at a loopback fake, with waits and credential saves
recorded instead of performed (a provider test never sleeps and never persists)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ctxstore.ports.connector_provider import AccountInfo, ProviderContext


@dataclass
class ContextRecorder:
    """Builds contexts on one fake; `sleeps` and `saved` hold what the provider asked for, in order."""

    base_url: str
    token_url: str | None
    credentials: dict[str, Any] = field(default_factory=dict)  # used when a test names none
    auth_type: str = "api_token"
    account: AccountInfo | None = None
    now: Callable[[], float] = time.time
    # What a wait does besides being recorded (a fake with its own clock advances it, so a reset arrives).
    on_sleep: Callable[[float], None] | None = None
    sleeps: list[float] = field(default_factory=list)
    saved: list[dict[str, Any]] = field(default_factory=list)

    def ctx(
        self, credentials: dict[str, Any] | None = None, auth_type: str | None = None, **kw: Any
    ) -> ProviderContext:
        kw.setdefault("account", self.account)
        return ProviderContext(
            credentials=credentials if credentials is not None else dict(self.credentials),
            auth_type=auth_type or self.auth_type,
            base_url=self.base_url,
            token_url=self.token_url,
            save_credentials=lambda creds: self.saved.append(dict(creds)),
            sleep=self._sleep,
            now=self.now,
            **kw,
        )

    def _sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.on_sleep is not None:
            self.on_sleep(seconds)
