"""``--backend=openai``: LoadGen's samples as streaming completion requests to OpenAI-compatible servers.

One ``OpenAIProcessor`` per server (``--llm_endpoints``, else the file ``make run_llm_server`` wrote), each a
GenerationProcessor like the in-process engines, so the streaming SUT (``code.common.llm.sut``) spreads samples
over them by outstanding requests, reports the first streamed token to ``FirstTokenComplete`` and the whole
answer to ``QuerySamplesComplete``. One asyncio loop per processor runs its requests on an aiohttp session
(pooled keep-alive connections, at most ``max_inflight`` requests on the wire, the rest wait in aiohttp's queue).

Each request: the prompt as token ids, ``max_tokens`` / ``min_tokens`` from the benchmark's generation settings,
its decoding (``temperature`` 0 when greedy; else ``temperature``, ``top_p``, ``top_k`` where it filters, and the
sample's own ``seed``, fields vLLM's, SGLang's and trtllm-serve's OpenAI routes take), ``stream``,
``return_token_ids`` (LoadGen needs the exact ids: vLLM sends them with this field, and so does the harness's own
server), and a stop sequence as ``stop_sequence_ids`` (the harness's server) and ``stop`` text (other servers). Beam
search is refused: OpenAI's completions API has no beams.

Servers that speak less: ``--llm_api=chat`` sends the prompt's text (decoded with the benchmark's tokenizer) as
one user message to ``/v1/chat/completions``; ``--llm_token_ids=retokenize`` takes the streamed text and encodes
it with that tokenizer (the first token from the first text piece, the answer from the whole text), as the
MLCommons endpoints client counts tokens. Both trade exactness for reach: the official echo server speaks only
chat and streams only text. A server without ``/v1/models`` needs ``--llm_served_model``.

Failures never hang a run: a server that does not answer at the start is a one-line error with the command that
starts it; one that dies, stalls past ``timeout_s`` between two chunks or answers an HTTP error mid-run answers
the sample empty, every later sample too, and the run ends with that server named.
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Callable, Sequence

import numpy as np

from code.common.errors import HarnessError
from code.common.llm.generation import GenRequest, GenerationProcessor, decoding
from code.common.llm.sampling import GREEDY, Sampling

START_FIX = 'make run_llm_server RUN_ARGS="--benchmarks={bench} --model_variant={variant}"'


class ServerLost(HarnessError):
    """A server failed mid-run (the run's error names it)."""


class OpenAIProcessor(GenerationProcessor):
    def __init__(self, endpoint: str, *, model: str | None = None, max_inflight: int = 64, timeout_s: float = 300.0,
                 eos_token_id: int | None = None, stop_text: Callable[[tuple[int, ...]], str] | None = None,
                 start_fix: str = "", name: str = "openai-0", api: str = "completions", token_ids: str = "server",
                 tokenizer_dir: str | None = None, sampling: Sampling = GREEDY):
        self.endpoint = endpoint.rstrip("/")
        self.sampling = sampling
        self.api = api
        self.retokenize = token_ids == "retokenize"
        # the benchmark's tokenizer: the chat route's prompt text, stop strings, and retokenized answers
        self.text = None
        if tokenizer_dir and (api == "chat" or self.retokenize or stop_text is None):
            from code.common.llm.tokentext import TokenText

            try:
                self.text = TokenText(tokenizer_dir)
            except Exception:  # noqa: BLE001 - no tokenizer.json: the id-only route still works
                if api == "chat" or self.retokenize:
                    raise HarnessError(f"--llm_api={api} --llm_token_ids={token_ids} needs the benchmark's tokenizer "
                                       f"(tokenizer.json in {tokenizer_dir})",
                                       "make download_model for this benchmark, or use --llm_api=completions "
                                       "--llm_token_ids=server") from None
        if stop_text is None and self.text is not None:
            stop_text = self.text.decode
        self.model = model
        self.max_batch_size = max(1, max_inflight)
        self.timeout_s = timeout_s
        self.eos_token_id = eos_token_id
        self.stop_text = stop_text
        self.start_fix = start_fix
        self.name = name
        self.errors: list[BaseException] = []
        self.lost: str | None = None
        self._outstanding = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._session = None
        self.counters = {"requests": 0, "completed": 0, "failed": 0, "tokens": 0, "chunks": 0}

    # --- lifecycle --------------------------------------------------------------------------------
    def warmup(self) -> None:
        """The server must be up (``/health``) and serve one model (``/v1/models``) before LoadGen starts."""
        import urllib.error
        import urllib.request

        def get(route: str):
            """(status, body): any HTTP answer means the server is up (a server without /health answers 404)."""
            try:
                with urllib.request.urlopen(f"{self.endpoint}{route}", timeout=10) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as e:
                return e.code, b""

        try:
            get("/health")
            status, body = get("/v1/models")
            served = [m.get("id") for m in json.loads(body).get("data", [])] if status == 200 else None
        except (urllib.error.URLError, OSError, ValueError) as e:
            why = getattr(e, "reason", None) or e
            raise HarnessError(f"no LLM server answers at {self.endpoint} ({why})",
                               f"start it: {self.start_fix}" if self.start_fix else "start the server, or name "
                               "running ones with --llm_endpoints=http://host:port,...") from None
        if self.model is None:
            if served is None:
                raise HarnessError(f"the LLM server at {self.endpoint} lists no models (/v1/models answered {status})",
                                   "name the model to send with --llm_served_model=<name>")
            if len(served) != 1:
                raise HarnessError(f"the LLM server at {self.endpoint} serves {len(served)} models ({', '.join(map(str, served))})",
                                   "name the one to use in the endpoints file or start a server per model")
            self.model = served[0]

    def start(self, on_first, on_done) -> None:
        super().start(on_first, on_done)
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._open())
            ready.set()
            self._loop.run_forever()
        self._thread = threading.Thread(target=run, daemon=True, name=self.name)
        self._thread.start()
        ready.wait()

    async def _open(self) -> None:
        import aiohttp

        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.max_batch_size, keepalive_timeout=60),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=self.timeout_s))

    def stop(self) -> None:
        if self._loop is None:
            return

        async def close() -> None:
            for t in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
                t.cancel()
            await self._session.close()
        try:
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=10)
        except Exception:  # noqa: BLE001 - closing after a failed run
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop = None

    def outstanding(self) -> int:
        return self._outstanding

    def progress(self) -> int:
        return self.counters["chunks"]

    def state(self) -> str:
        return (f"{self._outstanding} request(s) outstanding at {self.endpoint}"
                + (f"; lost: {self.lost}" if self.lost else ""))

    def stats(self) -> dict:
        return {"endpoint": self.endpoint, "model": self.model, **self.counters, "sampling": self.sampling.record()}

    # --- requests -----------------------------------------------------------------------------------
    def submit(self, requests: Sequence[GenRequest]) -> None:
        with self._lock:
            self._outstanding += len(requests)
        self._loop.call_soon_threadsafe(self._spawn, list(requests))

    def _spawn(self, requests: list[GenRequest]) -> None:
        for r in requests:
            self._loop.create_task(self._one(r))

    def route(self, r: GenRequest | None = None) -> str:
        chat = self.api == "chat" or (r is not None and r.media is not None)
        return f"{self.endpoint}/v1/chat/completions" if chat else f"{self.endpoint}/v1/completions"

    def body(self, r: GenRequest) -> dict:
        b = {"model": self.model, "max_tokens": int(r.max_new_tokens), "temperature": 0.0, "stream": True}
        how = decoding(r, self.sampling)
        if how is not None:            # top_k only when it filters: trtllm-serve takes no -1
            s, seed = how
            b.update({"temperature": s.temperature, "top_p": s.top_p, "seed": seed},
                     **({"top_k": s.top_k} if s.top_k > 0 else {}))
        if r.media is not None:        # a vision-language sample: its own messages (text and image_url parts)
            b["messages"] = r.media["messages"]
        elif self.api == "chat":
            b["messages"] = [{"role": "user", "content": self.text.decode(r.prompt)}]
        else:
            b["prompt"] = [int(t) for t in r.prompt]
        if not self.retokenize:
            b["return_token_ids"] = True
        if r.min_new_tokens:
            b["min_tokens"] = int(r.min_new_tokens)
        if r.stop:
            b["stop_sequence_ids"] = [int(t) for t in r.stop]
            if self.stop_text is not None:
                b["stop"] = [self.stop_text(r.stop)]
                b["include_stop_str_in_output"] = True
        return b

    async def _one(self, r: GenRequest) -> None:
        if self.lost is not None:
            return self._end(r, [], failed=True)
        self.counters["requests"] += 1
        tokens: list[int] = []
        pieces: list[str] = []               # llm_token_ids=retokenize: the streamed text
        try:
            async with self._session.post(self.route(r), json=self.body(r)) as resp:
                if resp.status != 200:
                    text = (await resp.text())[:200]
                    raise ServerLost(f"the LLM server at {self.endpoint} answered HTTP {resp.status}: {text}",
                                     "see the server's log (build/llm_server/) for why")
                async for raw in resp.content:
                    line = raw.strip()
                    if not line.startswith(b"data:"):
                        continue
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        break
                    self.counters["chunks"] += 1
                    choices = json.loads(data).get("choices") or []
                    if not choices:
                        continue
                    if self.retokenize:
                        # the first token as soon as the text so far encodes to one; the answer's ids at the end
                        pieces.append(choices[0].get("text") or (choices[0].get("delta") or {}).get("content") or "")
                        ids = [] if tokens else self.text.encode("".join(pieces), special=False)[:1]
                    else:
                        ids = choices[0].get("token_ids")
                        if ids is None:
                            raise ServerLost(f"the LLM server at {self.endpoint} sends no token ids",
                                             "use a server that returns them (vLLM: request field return_token_ids; "
                                             "the harness's own: make run_llm_server), or count the streamed text "
                                             "with --llm_token_ids=retokenize")
                    if ids and not tokens:
                        r.first_at = time.monotonic()
                        self.on_first(r, int(ids[0]))
                    tokens.extend(int(t) for t in ids)
        except asyncio.CancelledError:
            raise
        except ServerLost as e:
            return self._fail(r, e)
        except Exception as e:  # noqa: BLE001 - aiohttp's and the socket's errors alike end this server's part
            return self._fail(r, ServerLost(
                f"the LLM server at {self.endpoint} failed mid-run ({type(e).__name__}: {str(e)[:120] or 'no answer'})",
                f"see the server's log (build/llm_server/), then restart it: {self.start_fix}" if self.start_fix
                else "see the server's log, restart it and rerun"))
        if self.retokenize and tokens:
            tokens = [int(t) for t in self.text.encode("".join(pieces), special=False)]
        if not tokens:
            return self._fail(r, ServerLost(f"the LLM server at {self.endpoint} ended a stream with no tokens",
                                            "see the server's log (build/llm_server/)"))
        self._end(r, tokens)

    def _fail(self, r: GenRequest, e: ServerLost) -> None:
        if self.lost is None:
            self.lost = str(e)
            self.errors.append(e)
        self._end(r, [], failed=True)

    def _end(self, r: GenRequest, tokens: list[int], failed: bool = False) -> None:
        with self._lock:
            self._outstanding -= 1
        self.counters["failed" if failed else "completed"] += 1
        self.counters["tokens"] += len(tokens)
        r.tokens = tokens
        r.done = True
        self.on_done(r, np.asarray(tokens, dtype=np.int32))
