"""Django's ASGI handler, run as Django runs under WSGI: the middleware chain and the
view in one thread hop per request, on request threads that live as long as the process.

Why, 1: under ASGI, Django builds the middleware chain in async mode; every
``MiddlewareMixin`` (session, common, CSRF, auth, messages, …) below the first
sync-only one (WhiteNoise) then runs each of its hooks through ``sync_to_async``, a
hop from the event loop to the request thread and back, about fifteen per request,
each a future, a thread wake-up and a context copy. None of this project's HTTP
views is async, so the chain gains nothing from it. :class:`PooledASGIHandler`
loads the chain in sync mode (exactly the WSGI handler's chain) and crosses to the
request thread once, for the whole chain.

Why, 2: Django's ``ASGIHandler`` runs each request's synchronous part (middleware,
view, ORM) in a thread of that request alone: it enters asgiref's
``ThreadSensitiveContext()``, which makes a one-thread ``ThreadPoolExecutor`` for the
request and shuts it down (joining the thread) when the request ends. Profiled
under the four dashboard reads (``benchmarks/serving.py``, py-spy on one web
process), starting and joining that thread, and everything the thread rebuilt
because it was new (Django's per-thread database wrapper, its pooled connection's
set-up), was the largest single cost after the views themselves.

:class:`PooledASGIHandler` gives each request a one-thread executor from a free
list instead (asgiref >= 3.10: ``ThreadSensitiveContext(executor=…)``, which leaves
the executor running on exit). The guarantee Django needs is unchanged: all the
synchronous code of one request runs on one thread, and no other request runs on
that thread meanwhile (an executor is on the free list only between requests).
Up to :data:`KEEP_IDLE` idle executors are kept; past that a finished request's
executor is shut down, so a burst of many concurrent requests does not leave as
many idle threads behind.

Priority for the agents' batches (``TWIN_WEB_THREADS``, off by default): with 100
readers on two processes, each process runs ~50 request threads at once, and the
interpreter lock is shared round-robin among them (every 5 ms), so an agent's batch
POST, ~9 ms of CPU, took ~50 times its CPU in wall time (p50 0.25 s, p99 1.3 s
on the loaded machine; ``TWIN_TELEMETRY_TRACE``): the live view lagged the cards by
that much before any worker saw the batch. With ``TWIN_WEB_THREADS = N`` at most N
requests per process run their synchronous part at once; the others wait on the
event loop (an ``asyncio.Semaphore``, no thread), and requests to the ingest paths
(:data:`PRIORITY_PATH`: batches, remote write, facility readings) never wait for a
slot, so a batch competes with at most N readers for the lock. Readers' throughput
is unchanged or better (fewer threads switching); their latency now includes the
wait for a slot instead of the wait for the lock.
"""
from __future__ import annotations

import asyncio
import inspect
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler

__all__ = ["KEEP_IDLE", "PRIORITY_PATH", "PooledASGIHandler", "get_pooled_asgi_application",
           "web_threads"]

_EXECUTOR_PARAM = "executor" in inspect.signature(ThreadSensitiveContext).parameters
"""asgiref too old for a caller-owned executor: Django's own way (a thread per request)."""

KEEP_IDLE = 64
"""Idle request threads kept per process (the benchmark's 100 clients over two
processes reuse them all; a larger burst starts more and lets them go)."""


PRIORITY_PATH = re.compile(r"^/api/telemetry/clusters/\d+/(batches|write|facility)/?$")
"""Paths that never wait for a request slot (``TWIN_WEB_THREADS``): the agents' ingest."""


def web_threads() -> int:
    """``TWIN_WEB_THREADS``: requests per process whose synchronous part may run at once
    (ingest paths excepted); 0 (the default): no limit."""
    from django.conf import settings

    return max(int(getattr(settings, "TWIN_WEB_THREADS", 0) or 0), 0)


class PooledASGIHandler(ASGIHandler):  # type: ignore[misc]  # (Django ships no stubs here)
    """``ASGIHandler`` with a sync middleware chain entered in one hop, whose requests
    borrow a long-lived one-thread executor."""

    def __init__(self) -> None:
        super().__init__()
        # The chain in sync mode (as under WSGI), entered with one thread-sensitive hop:
        # get_response_async awaits it, and everything below runs on the request thread.
        self.load_middleware(is_async=False)
        self._middleware_chain = sync_to_async(self._middleware_chain,  # type: ignore[has-type]
                                               thread_sensitive=True)
        self._idle: list[ThreadPoolExecutor] = []  # touched only on the event loop
        self.threads = web_threads()
        self._slots: asyncio.Semaphore | None = None  # made on the loop, at first use

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not "
                             f"{scope['type']}.")
        if self.threads and not PRIORITY_PATH.match(scope.get("path", "")):
            if self._slots is None:
                self._slots = asyncio.Semaphore(self.threads)
            async with self._slots:
                await self._run(scope, receive, send)
        else:
            await self._run(scope, receive, send)

    async def _run(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if not _EXECUTOR_PARAM:
            await super().__call__(scope, receive, send)
            return
        executor = (self._idle.pop() if self._idle else
                    ThreadPoolExecutor(max_workers=1, thread_name_prefix="twin-request"))
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            if len(self._idle) < KEEP_IDLE:
                self._idle.append(executor)
            else:
                executor.shutdown(wait=False)


def get_pooled_asgi_application() -> PooledASGIHandler:
    """``django.core.asgi.get_asgi_application`` with :class:`PooledASGIHandler`."""
    import django

    django.setup(set_prefix=False)
    return PooledASGIHandler()
