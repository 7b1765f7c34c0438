"""One client for an OpenAI-compatible server: `/v1/completions` (streamed or not), plus the
plain GET/POST the probes need (`/metrics`, `/start_profile`, ...), with one SSE reader.

    with CompletionClient(base_url, timeout_s=120) as api:
        with api.stream_completion(body, progress=lambda: "3 of 8 tokens") as stream:
            for arrival, obj in stream:     # arrival: perf_counter() at the network read
                ...                          # obj: one JSON object; [DONE] ends the loop
        stream.saw_done, stream.events

Timing: every network read is timestamped with `time.perf_counter()` the moment it
arrives, and every SSE event completed by that read gets that arrival time (the decode
probe's accuracy rests on this; do not buffer reads). `trust_env=False`: the engine is
addressed directly, a host's proxy settings must not apply.

Failures are ProbeError with a message that says how far the stream got (`progress()`):
HTTP status (body included), timeout, refused connection, a connection dropped mid-stream,
an event cut off, data after [DONE], malformed JSON, an error object in the stream.
"""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

import httpx

RECEIVED_MAX = 2000  # characters of raw input kept in a ProbeError


class ProbeError(Exception):
    """The server's answer cannot be turned into a measurement. `received` holds what came back."""

    def __init__(self, message: str, received: Any = None):
        super().__init__(message)
        self.message = message
        self.received = received

    def to_dict(self) -> dict:
        return {"error": self.message, "received": self.received}


def clip(text: str, limit: int = RECEIVED_MAX) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


# ------------------------------------------------------------------------- SSE
def sse_events(pieces: Iterable[bytes], clock: Callable[[], float] = time.perf_counter
               ) -> Iterator[tuple[float | None, str]]:
    """(arrival, data) per SSE event, from the raw reads PIECES. The arrival is clock() at the
    read that completed the event; trailing bytes without the closing blank line come last,
    with arrival None. Only `data:` lines matter; `event:`, `id:`, `retry:`, comments are skipped."""
    buf = b""
    for piece in pieces:
        t = clock()
        buf = (buf + piece).replace(b"\r\n", b"\n")  # whole buffer: a CRLF may straddle reads
        while (end := buf.find(b"\n\n")) != -1:
            block, buf = buf[:end], buf[end + 2:]
            data = _event_data(block)
            if data is not None:
                yield t, data
    if buf.strip():
        yield None, buf.decode("utf-8", errors="replace")


def _event_data(block: bytes) -> str | None:
    lines = []
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            lines.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(lines).decode("utf-8", errors="replace") if lines else None


class CompletionStream:
    """The JSON events of one streamed completion: iterate for (arrival, object)."""

    def __init__(self, response: httpx.Response, progress: Callable[[], str]):
        self._response = response
        self._progress = progress
        self.events = 0
        self.saw_done = False

    def __iter__(self) -> Iterator[tuple[float, dict]]:
        for t, data in sse_events(self._response.iter_bytes()):
            self.events += 1
            if t is None:
                raise ProbeError(f"stream ended inside an SSE event ({self._progress()})", received=clip(data))
            if self.saw_done:
                raise ProbeError("data after [DONE]", received=clip(data))
            if data.strip() == "[DONE]":
                self.saw_done = True
                continue
            yield t, self._json_object(data)

    def _json_object(self, data: str) -> dict:
        try:
            obj = json.loads(data)
        except json.JSONDecodeError as e:
            raise ProbeError(f"malformed SSE JSON in event #{self.events} ({e}; {self._progress()})",
                             received=clip(data)) from None
        if not isinstance(obj, dict):
            raise ProbeError(f"SSE event #{self.events} is not a JSON object", received=clip(data))
        if "error" in obj:
            raise ProbeError(f"server reported an error in the stream after {self._progress()}: "
                             f"{clip(json.dumps(obj['error']), 500)}", received=clip(data))
        return obj


# ----------------------------------------------------------------------- client
class CompletionClient:
    """An OpenAI-compatible server at BASE_URL. Closes the httpx client only if it made it."""

    def __init__(self, base_url: str, *, timeout_s: float, connect_s: float | None = None,
                 client: httpx.Client | None = None):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._own = client is None
        timeout = httpx.Timeout(timeout_s) if connect_s is None else httpx.Timeout(timeout_s, connect=connect_s)
        self.http = client or httpx.Client(trust_env=False, timeout=timeout)

    def url(self, path: str) -> str:
        return self.base_url + path

    def close(self) -> None:
        if self._own:
            self.http.close()

    def __enter__(self) -> "CompletionClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def get(self, path: str, *, timeout_s: float | None = None) -> httpx.Response:
        """GET PATH; transport failures raise httpx.HTTPError (callers decide what they mean)."""
        return self.http.get(self.url(path), timeout=timeout_s or self.timeout_s)

    def post(self, path: str, *, json_body: dict | None = None, timeout_s: float | None = None) -> httpx.Response:
        """POST PATH (JSON body); a transport failure is a ProbeError, the status is the caller's."""
        url = self.url(path)
        try:
            return self.http.post(url, json=json_body, timeout=timeout_s or self.timeout_s)
        except httpx.HTTPError as e:
            raise transport_error(e, url, timeout_s or self.timeout_s, "no answer") from None

    def complete(self, body: dict, *, timeout_s: float | None = None) -> dict:
        """One non-streamed completion: the answer's JSON object (ProbeError otherwise)."""
        r = self.post("/v1/completions", json_body=dict(body, stream=False), timeout_s=timeout_s)
        _raise_for_status(r.status_code, r.text, self.url("/v1/completions"))
        try:
            obj = r.json()
        except ValueError:
            raise ProbeError(f"/v1/completions answered with non-JSON: {clip(r.text, 1000)}",
                             received=clip(r.text)) from None
        if not isinstance(obj, dict):
            raise ProbeError("/v1/completions answered with a JSON value that is not an object",
                             received=clip(r.text))
        return obj

    @contextmanager
    def stream_completion(self, body: dict, *, timeout_s: float | None = None,
                          progress: Callable[[], str] = lambda: "") -> Iterator[CompletionStream]:
        """POST a streamed completion; yields its CompletionStream once the status is 200.
        TIMEOUT_S bounds the connect and each network read (a silent server is a ProbeError)."""
        url = self.url("/v1/completions")
        timeout_s = timeout_s or self.timeout_s
        try:
            with self.http.stream("POST", url, json=dict(body, stream=True), timeout=timeout_s) as resp:
                if resp.status_code != 200:
                    _raise_for_status(resp.status_code, resp.read().decode("utf-8", errors="replace"), url)
                yield CompletionStream(resp, progress)
        except httpx.HTTPError as e:
            raise transport_error(e, url, timeout_s, progress()) from None


def _raise_for_status(status: int, text: str, url: str) -> None:
    if status != 200:
        raise ProbeError(f"HTTP {status} from POST {url}: {clip(text, 1000)}",
                         received={"status": status, "body": clip(text)})


def transport_error(e: httpx.HTTPError, url: str, timeout_s: float, progress: str) -> ProbeError:
    """A ProbeError that names what failed (timeout, refused, dropped) and how far it got."""
    where = f" ({progress})" if progress else ""
    if isinstance(e, httpx.TimeoutException):
        return ProbeError(f"timeout: no answer from {url} within {timeout_s:g} s ({type(e).__name__}){where}",
                          received={"progress": progress})
    if isinstance(e, httpx.ConnectError):
        return ProbeError(f"cannot connect to {url}: {e}", received=None)
    if isinstance(e, (httpx.RemoteProtocolError, httpx.ReadError)):
        return ProbeError(f"stream closed early: {progress or 'nothing received'}, connection ended "
                          f"({type(e).__name__}: {e})", received={"progress": progress})
    return ProbeError(f"HTTP failure on {url}: {type(e).__name__}: {e}{where}", received={"progress": progress})
