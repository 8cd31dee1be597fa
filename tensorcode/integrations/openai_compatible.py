"""A chat-completions client over the standard library.

Many servers (vLLM, llama.cpp, Ollama, hosted APIs) speak the same ``POST
{base_url}/chat/completions`` protocol, so one small client covers them without a
dependency. Transient failures (HTTP 429 and 5xx, timeouts, dropped connections) are
retried a bounded number of times with a growing pause; everything else fails at once
with a ``ModelError`` that says what the server did.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from http.client import HTTPException
from typing import Any

from .model import ModelError, ModelRequest

#: statuses worth another try: rate limits and server-side failures
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
#: replies larger than this are refused rather than read into memory
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
#: the longest pause a server's Retry-After header may impose between tries
MAX_RETRY_AFTER_S = 30.0
#: the longest one ``complete`` call may take, every try and pause included
DEFAULT_DEADLINE_S = 180.0


class OpenAICompatibleModel:
    """A ``Model`` served over the OpenAI-compatible chat-completions protocol.

    ``base_url`` is the API root (``http://localhost:8000/v1``); ``timeout`` bounds each
    HTTP request in seconds; ``retries`` is how many more tries a transient failure gets
    (so at most ``retries + 1`` requests per ``complete``); ``backoff`` is the first
    pause in seconds, doubled after each failure. ``deadline`` bounds one ``complete``
    as a whole (every try and pause together, in seconds), so a server that never
    answers costs at most that long rather than ``(retries + 1) * timeout`` plus the
    pauses; a request's own ``ModelRequest.deadline`` shortens it further.
    ``requests_made`` counts HTTP requests.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 timeout: float = 120.0, retries: int = 2, backoff: float = 1.0,
                 max_tokens: int | None = None, temperature: float | None = 0.0,
                 system: str | None = None, deadline: float = DEFAULT_DEADLINE_S) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ModelError(f"base_url must be an http:// or https:// URL such as "
                             f"'http://localhost:8000/v1', got {base_url!r}")
        if not isinstance(model, str) or not model:
            raise ModelError("model must name the served model, e.g. model='my-model'")
        if not (isinstance(retries, int) and retries >= 0):
            raise ModelError(f"retries must be a non-negative integer, got {retries!r}")
        if not (timeout > 0):
            raise ModelError(f"timeout must be positive seconds, got {timeout!r}")
        if not (isinstance(deadline, (int, float)) and deadline > 0):
            raise ModelError(f"deadline must be positive seconds, got {deadline!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = float(timeout)
        self.deadline = float(deadline)
        self.retries = retries
        self.backoff = float(backoff)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.system = system
        self.requests_made = 0

    def __repr__(self) -> str:
        return f"OpenAICompatibleModel(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def url(self) -> str:
        """The chat-completions endpoint under ``base_url``."""
        return f"{self.base_url}/chat/completions"

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON request body for ``request``."""
        messages = []
        system = request.system if request.system is not None else self.system
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": request.prompt})
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        temperature = request.temperature if request.temperature is not None else self.temperature
        if temperature is not None:
            body["temperature"] = temperature
        max_tokens = request.max_tokens if request.max_tokens is not None else self.max_tokens
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        return body

    def complete(self, request: ModelRequest | str) -> str:
        """The reply text of one chat completion (retrying transient failures)."""
        if isinstance(request, str):
            request = ModelRequest(prompt=request)
        data = json.dumps(self.body(request)).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        pause = self.backoff
        last: str = ""
        status: int | None = None
        limit = self.deadline if request.deadline is None else min(self.deadline,
                                                                   request.deadline)
        ends = time.monotonic() + limit
        tries = 0
        for attempt in range(1, self.retries + 2):
            remaining = ends - time.monotonic()
            if remaining <= 0:
                break
            http = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            self.requests_made += 1
            tries = attempt
            wait = pause
            timeout = min(self.timeout, remaining)
            try:
                with urllib.request.urlopen(http, timeout=timeout) as response:
                    payload = response.read(MAX_RESPONSE_BYTES + 1)
                    status = response.status
                if len(payload) > MAX_RESPONSE_BYTES:
                    raise ModelError(f"{self.url} answered with more than {MAX_RESPONSE_BYTES} "
                                     "bytes; that is not a chat completion", status, attempt)
                return _reply_text(self.url, payload, attempt)
            except urllib.error.HTTPError as error:
                status = error.code
                detail = _excerpt(error.read(4096) if error.fp is not None else b"")
                last = f"HTTP {error.code} {error.reason}" + (f": {detail}" if detail else "")
                if error.code not in RETRYABLE_STATUSES:
                    raise ModelError(f"{self.url} refused the request with {last}; check the "
                                     "model name, the API key and the request size", status,
                                     attempt) from None
                retry_after = _retry_after(error.headers.get("Retry-After") if error.headers
                                           else None)
                if retry_after is not None:
                    wait = max(wait, retry_after)
            except TimeoutError:
                status = None
                last = f"no answer within {timeout:g} s"
            except urllib.error.URLError as error:
                status = None
                if isinstance(error.reason, (socket.timeout, TimeoutError)):
                    last = f"no answer within {timeout:g} s"
                else:
                    last = f"could not connect: {error.reason}"
            except (ConnectionError, HTTPException) as error:
                status = None
                last = f"the connection failed: {error!r}"
            if attempt <= self.retries:
                remaining = ends - time.monotonic()
                if wait >= remaining:
                    break  # the pause alone would pass the deadline
                time.sleep(wait)
                pause *= 2
        if tries < self.retries + 1:
            raise ModelError(f"{self.url}: {last or 'no try was made'} (after {tries} "
                             f"{'try' if tries == 1 else 'tries'}, stopped at the deadline of "
                             f"{limit:g} s for one completion); check that the server is up, "
                             "or raise deadline", status, tries)
        raise ModelError(f"{self.url}: {last} (after {self.retries + 1} tries); check that the "
                         "server is up, or raise timeout/retries", status, self.retries + 1)


def _excerpt(raw: bytes, limit: int = 300) -> str:
    text = raw.decode("utf-8", errors="replace").strip()
    return text if len(text) <= limit else text[:limit] + "..."


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    if seconds != seconds or seconds < 0:
        return None
    return min(seconds, MAX_RETRY_AFTER_S)


def reply_text(url: str, payload: bytes, attempt: int = 1) -> str:
    """The reply text of a chat-completions body (``ModelError`` saying what is missing):
    the one parser of replies, shared with the asynchronous serving client."""
    return _reply_text(url, payload, attempt)


def _reply_text(url: str, payload: bytes, attempt: int) -> str:
    """Reply text from a chat-completions response body, or a ``ModelError`` saying
    what was missing."""
    try:
        document = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelError(f"{url} answered with a body that is not JSON ({error}): "
                         f"{_excerpt(payload)!r}; is base_url the API root (often ending "
                         "in /v1)?", 200, attempt) from None
    if not isinstance(document, dict):
        raise ModelError(f"{url} answered with JSON that is not an object: "
                         f"{_excerpt(payload)!r}", 200, attempt)
    if "error" in document and "choices" not in document:
        raise ModelError(f"{url} answered with an error: {document['error']!r}", 200, attempt)
    choices = document.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelError(f"{url} answered without a 'choices' list; not a chat completion: "
                         f"{_excerpt(payload)!r}", 200, attempt)
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise ModelError(f"{url}: choices[0] has no 'message' object: {_excerpt(payload)!r}",
                         200, attempt)
    refusal = message.get("refusal")
    if refusal:
        raise ModelError(f"the model refused: {str(refusal)[:300]}", 200, attempt)
    if choice.get("finish_reason") == "content_filter":
        raise ModelError("the model's reply was withheld by a content filter "
                         "(finish_reason 'content_filter'); rephrase the task", 200, attempt)
    content = message.get("content")
    if isinstance(content, list):  # some servers return content parts
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        texts = [p for p in parts if isinstance(p, str)]
        if texts and len(texts) == len(parts):
            content = "".join(texts)
    if not isinstance(content, str) or not content.strip():
        raise ModelError(f"{url}: the reply has no text content (finish_reason "
                         f"{choice.get('finish_reason')!r}); raise max_tokens or check the "
                         "model", 200, attempt)
    return content
