"""The aiohttp session and endpoint limiter of one HTTP caller, opened in the event loop that uses them.

The OpenAI-protocol client and the HTTP app target reach their endpoints the same way: a session made on
the first call, with the endpoint's limiter, and made again in a new event loop (say, a second
`asyncio.run`), which cannot use the old loop's session."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp

from mheval.models.limits import EndpointLimiter


class LoopClient:
    """One caller's session and limiter; `open` gives them for the running loop, `close` ends the session."""

    def __init__(self) -> None:
        self.session: aiohttp.ClientSession | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.limiter: EndpointLimiter | None = None

    def open(
        self, concurrency: int, timeout_s: float, limiter: Callable[[], EndpointLimiter]
    ) -> tuple[aiohttp.ClientSession, EndpointLimiter]:
        """The session and limiter of the running loop: at most `concurrency` connections, `timeout_s` a call;
        `limiter` makes the endpoint's limiter when the session is made."""
        loop = asyncio.get_running_loop()
        if self.session is None or self.session.closed or self.loop is not loop:
            self.loop = loop
            self.session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=concurrency),
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            )
            self.limiter = limiter()
        assert self.limiter is not None
        return self.session, self.limiter

    async def close(self) -> None:
        """Close the session when it belongs to the running loop (another loop's cannot be closed from here)."""
        if self.session is not None and self.loop is asyncio.get_running_loop():
            await self.session.close()
        self.session = None
        self.limiter = None
