"""What every test server shares: a request record, and serving a handler class on loopback."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["LoopbackServer", "Request"]


@dataclass
class Request:
    """One request as the server saw it (for assertions)."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    headers: dict[str, str]

    @property
    def int_enums(self) -> bool:
        """True when the client asked for integer enums (``$alt=json;enum-encoding=int``)."""
        return any("enum-encoding=int" in v for v in self.query.get("$alt", []))

    def param(self, name: str, default: str = "") -> str:
        values = self.query.get(name)
        return values[0] if values else default

    @property
    def bearer(self) -> str:
        """The bearer token sent, '' when anonymous."""
        auth = self.headers.get("authorization", "")
        return auth[7:] if auth.lower().startswith("bearer ") else ""


class LoopbackServer:
    """Serves ``handler_class`` (which reaches the server as ``self.owner``) on 127.0.0.1."""

    handler_class: type[BaseHTTPRequestHandler]
    _httpd: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: the value for ``TRAINGUARD_ENDPOINT_<API>``."""
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self):
        """Serves on a free loopback port in a daemon thread; returns self."""
        handler = type("Handler", (self.handler_class,), {"owner": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        # A short poll interval keeps ``stop()`` (and so each test's teardown) fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name=type(self).__name__, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops serving and closes the socket."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
