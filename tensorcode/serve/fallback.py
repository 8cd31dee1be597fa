"""The teacher behind escalated cases: an OpenAI-compatible model over async HTTP.

The request body, the retryable statuses and the reply parsing are those of
``OpenAICompatibleModel`` (one protocol implementation); what differs is the transport:
an ``httpx.AsyncClient`` so a slow teacher never blocks the event loop, with a timeout
per request, a semaphore bounding the requests in flight, and bounded retries with a
doubling pause. The teacher is asked for a JSON object of the router's outputs, which is
validated against the output contract like any input.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from typing import Any

from ..distill.inputs import InputError, check_case, read_document
from ..errors import TensorCodeError
from ..extras import require
from ..integrations import ModelError, ModelRequest, OpenAICompatibleModel
from ..integrations.openai_compatible import RETRYABLE_STATUSES, reply_text
from .served import ServedRouter, json_value

_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


class FallbackError(TensorCodeError):
    """The teacher could not answer an escalated case; the message says why."""


class TeacherFallback:
    """``await fallback(router, case) -> {output: value}`` from an OpenAI-compatible
    server at ``base_url`` serving ``model``.

    ``timeout`` bounds each HTTP request (seconds), ``concurrency`` the requests in
    flight across all routers, ``retries`` the extra tries a transient failure (HTTP
    408/429/5xx, timeout, dropped connection) gets, ``backoff`` the first pause.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 timeout: float = 30.0, concurrency: int = 8, retries: int = 2,
                 backoff: float = 0.25, system: str | None = None) -> None:
        self.model = OpenAICompatibleModel(base_url, model, api_key=api_key, timeout=timeout,
                                           retries=retries, backoff=backoff, system=system)
        if not (isinstance(concurrency, int) and concurrency >= 1):
            raise TensorCodeError(f"concurrency must be a positive integer, got {concurrency!r}")
        self.concurrency = concurrency
        self._httpx = require("httpx")
        self._client: Any = None
        self._semaphore: asyncio.Semaphore | None = None
        self.requests_made = 0

    def __repr__(self) -> str:
        return f"TeacherFallback({self.model.base_url!r}, model={self.model.model!r})"

    def prompt(self, router: ServedRouter, case: Mapping[str, Any]) -> str:
        """The question for one case: the router's task, the inputs, the answer's form."""
        inputs = {name: json_value(value) for name, value in case.items()}
        form = {name: ("a number" if not shape else f"an array of shape {list(shape)}")
                for name, shape in router.outputs.items()}
        return (f"{router.distillation.task}\n\nInputs: {json.dumps(inputs)}\n\n"
                f"Reply with only a JSON object with exactly these keys: "
                f"{json.dumps(form)}.")

    async def __call__(self, router: ServedRouter, case: Mapping[str, Any]) -> dict[str, Any]:
        request = ModelRequest(prompt=self.prompt(router, case))
        text = await self._complete(request)
        match = _OBJECT.search(text)
        if match is None:
            raise FallbackError(f"the teacher's reply holds no JSON object: {text[:200]!r}")
        try:
            answer = check_case(read_document(match.group(0)), router.outputs)
        except InputError as error:
            raise FallbackError(f"the teacher's answer does not fit the outputs: {error}") from None
        return {name: json_value(value) for name, value in answer.items()}

    async def _complete(self, request: ModelRequest) -> str:
        httpx = self._httpx
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.model.timeout)
            self._semaphore = asyncio.Semaphore(self.concurrency)
        assert self._semaphore is not None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.model.api_key:
            headers["Authorization"] = f"Bearer {self.model.api_key}"
        body = self.model.body(request)
        url = self.model.url
        pause = self.model.backoff
        last = ""
        for attempt in range(1, self.model.retries + 2):
            async with self._semaphore:
                self.requests_made += 1
                try:
                    response = await self._client.post(url, json=body, headers=headers)
                except httpx.TimeoutException:
                    last = f"no answer within {self.model.timeout:g} s"
                except httpx.HTTPError as error:
                    last = f"the connection failed: {error!r}"
                else:
                    if response.status_code == 200:
                        try:
                            return reply_text(url, response.content, attempt)
                        except ModelError as error:
                            raise FallbackError(str(error)) from None
                    last = f"HTTP {response.status_code}: {response.text[:200]}"
                    if response.status_code not in RETRYABLE_STATUSES:
                        raise FallbackError(f"{url} refused the request with {last}")
            if attempt <= self.model.retries:
                await asyncio.sleep(pause)
                pause *= 2
        raise FallbackError(f"{url}: {last} (after {self.model.retries + 1} tries)")

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
