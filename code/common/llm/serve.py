"""The harness's own OpenAI-compatible LLM server: one generation worker behind aiohttp.web, a separate process.

``make run_llm_server`` starts it where no vLLM, SGLang or TensorRT-LLM serves the benchmark (CPU machines, the
tiny models everywhere); ``--backend=openai`` then drives it over HTTP exactly as it drives those servers
(``code.common.llm.openai_client``). Its worker is the in-process backend the spec names (transformers: the
harness's batching scheduler over a Hugging Face model), so tokens through HTTP are the in-process tokens.

Routes:

- ``GET /health``: 200 once the model is loaded and warm (503 before);
- ``GET /v1/models``: the one model it serves (``--served_model``);
- ``POST /v1/completions``: ``prompt`` as text or as token ids (a list of ints), ``max_tokens``, ``min_tokens``,
  ``temperature``, ``top_k`` (0 or -1: off), ``top_p`` and ``seed`` (the request's own stream; each absent one is
  the benchmark's, as the worker decodes: code.common.llm.sampling), ``stop`` (strings, tokenized here),
  ``stop_token_ids`` (each id ends the output), ``stop_sequence_ids`` (a token sequence that ends it, kept, as the
  harness's own stop sequences are; an extension other servers ignore), ``return_token_ids`` (vLLM's field:
  the answer carries ``prompt_token_ids`` and each choice its ``token_ids``; this server always sends them),
  ``stream``;
- ``POST /v1/chat/completions``: ``messages`` through the checkpoint's chat template (a checkpoint without one,
  as the tiny ones: the contents joined by newlines, as plain text), otherwise as above.

Streaming is Server-Sent Events (``data: {json}`` lines, then ``data: [DONE]``): one chunk as soon as the first
token exists (the client's time to first token), then one with the rest when the sample ends (the scheduler
hands a sample's tokens out at its end; LoadGen needs only those two moments and the ids).

usage: python -m code.common.llm.serve --spec SPEC.json --port N [--host 127.0.0.1]
SPEC.json: {"worker": WorkerSpec fields, "backend": "transformers", "served_model": name, "tokenizer": folder}
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

from code.common.llm.generation import GenRequest, GenerationProcessor
from code.common.llm.sampling import Sampling
from code.common.llm.tokentext import Bad, TokenText

MAX_BODY = 64 << 20        # a request body past this is refused (413)


class Served:
    """The worker and the requests waiting on it; the worker's callbacks come from its own thread and are handed
    to the event loop."""

    def __init__(self, processor: GenerationProcessor | None, served_model: str, text: TokenText, max_new_tokens: int):
        self.proc = processor
        self.model = served_model
        self.text = text
        self.max_new_tokens = max_new_tokens
        self.ready = False
        self.ids = itertools.count(1)
        self.waiting: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}
        self.stop_ids: dict[int, set[int]] = {}
        self.served = 0
        self.vision = None        # code.common.llm.vision.ChatInputs where the worker takes images

    def start(self) -> None:
        self.proc.warmup()
        self.proc.start(self._first, self._done)
        self.ready = True

    def _put(self, r: GenRequest, item: tuple) -> None:
        w = self.waiting.get(r.qid)
        if w is not None:
            w[0].call_soon_threadsafe(w[1].put_nowait, item)

    def _first(self, r: GenRequest, token: int) -> None:
        self._put(r, ("first", int(token)))

    def _done(self, r: GenRequest, tokens: np.ndarray) -> None:
        self._put(r, ("done", [int(t) for t in tokens]))

    # --- one request --------------------------------------------------------------------------------
    def request(self, body: dict, chat: bool) -> tuple[GenRequest, list[int], set[int]]:
        if not isinstance(body, dict):
            raise Bad("the body must be a JSON object")
        if int(body.get("n") or 1) != 1 or int(body.get("best_of") or 1) != 1 or body.get("use_beam_search"):
            raise Bad("this server returns one completion per request (n=1, no beam search)")
        sampling = self.sampling(body)
        media = None
        if chat:
            msgs = body.get("messages")
            if not isinstance(msgs, list) or not msgs:
                raise Bad("messages: a non-empty list is required")
            if self.vision is not None:
                from code.common.llm.vision import has_images

                if not has_images(msgs):
                    raise Bad("messages: this model's requests carry an image_url part")
                try:
                    prompt, _ = self.vision.encode(msgs)
                except (ValueError, OSError, KeyError, TypeError) as e:
                    raise Bad(f"messages: {str(e)[:160]}") from None
                media = {"messages": msgs}
            else:
                prompt = self.text.chat(msgs)
        else:
            p = body.get("prompt")
            if isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
                p = p[0]                                   # a batch of one
            if isinstance(p, str):
                prompt = self.text.encode(p)
            elif isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
                prompt = p
            else:
                raise Bad("prompt: text or a non-empty list of token ids (one prompt per request)")
        mx = body.get("max_tokens", body.get("max_completion_tokens"))
        mx = self.max_new_tokens if mx is None else int(mx)
        mn = int(body.get("min_tokens") or 0)
        if mx < 1 or mn < 0 or mn > mx:
            raise Bad(f"max_tokens {mx} / min_tokens {mn}: need 1 <= max_tokens and 0 <= min_tokens <= max_tokens")
        seq = body.get("stop_sequence_ids") or ()
        stop = body.get("stop") or ()
        if isinstance(stop, str):
            stop = [stop]
        if stop and not seq:
            if len(stop) > 1:
                raise Bad("stop: one stop string per request")
            seq = self.text.encode(stop[0], special=False)
        if not all(isinstance(t, int) for t in seq):
            raise Bad("stop_sequence_ids: token ids")
        qid = next(self.ids)
        seed = body.get("seed")
        r = GenRequest(qid, 0, np.asarray(prompt, dtype=np.int64), mx, mn, stop=tuple(int(t) for t in seq),
                       issued=time.monotonic(), media=media, sampling=sampling,
                       seed=sampling.request_seed(qid) if seed is None else int(seed))
        return r, list(prompt), {int(t) for t in body.get("stop_token_ids") or ()}

    def sampling(self, body: dict) -> Sampling:
        """The request's decoding: its temperature, top_k and top_p, the worker's (the benchmark's) for those it
        leaves out."""
        base = self.proc.sampling
        t, k, p = (body.get(x) for x in ("temperature", "top_k", "top_p"))
        s = Sampling(temperature=base.temperature if t is None else float(t), top_k=base.top_k if k is None else int(k),
                     top_p=base.top_p if p is None else float(p), seed=base.seed)
        if not (s.temperature >= 0 and 0 <= s.top_p <= 1 and s.top_k >= -1):
            raise Bad(f"temperature {s.temperature:g} / top_p {s.top_p:g} / top_k {s.top_k}: need temperature >= 0, "
                      "0 <= top_p <= 1 and top_k >= -1")
        if body.get("seed") is not None and not isinstance(body["seed"], int):
            raise Bad("seed: an integer")
        return s

    def finish_reason(self, r: GenRequest, tokens: list[int], cut: bool) -> str:
        eos = {self.proc.eos_token_id, *getattr(self.proc, "extra_eos", ())} - {None}
        if cut or (tokens and tokens[-1] in eos) or (r.stop and tuple(tokens[-len(r.stop):]) == r.stop):
            return "stop"
        return "length"


def _chunk(kind: str, rid: str, model: str, tokens: list[int], text: str, finish: str | None) -> dict:
    choice = {"index": 0, "finish_reason": finish, "token_ids": tokens, "logprobs": None}
    if kind == "chat":
        choice["delta"] = {"content": text} if text or not finish else {}
        return {"id": rid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                "choices": [choice]}
    choice["text"] = text
    return {"id": rid, "object": "text_completion", "created": int(time.time()), "model": model, "choices": [choice]}


def make_app(served: Served):
    from aiohttp import web

    async def health(_request):
        return web.json_response({"status": "ok" if served.ready else "loading", "served": served.served},
                                 status=200 if served.ready else 503)

    async def models(_request):
        return web.json_response({"object": "list", "data": [{"id": served.model, "object": "model",
                                                              "owned_by": "mlperf-harness"}]})

    async def generate(request, kind: str):
        if not served.ready:
            return web.json_response({"error": {"message": "the model is still loading", "type": "unavailable"}},
                                     status=503)
        try:
            body = await request.json()
            r, prompt, stop_ids = served.request(body, kind == "chat")
        except (Bad, ValueError, TypeError) as e:
            return web.json_response({"error": {"message": str(e) or type(e).__name__, "type": "invalid_request_error"}},
                                     status=400)
        if body.get("model") not in (None, served.model):
            return web.json_response({"error": {"message": f"model {body.get('model')!r} is not served here; "
                                                f"this server serves {served.model!r}", "type": "not_found"}}, status=404)
        rid = f"cmpl-{r.qid}"
        q: asyncio.Queue = asyncio.Queue()
        served.waiting[r.qid] = (asyncio.get_running_loop(), q)
        served.proc.submit([r])
        stream = bool(body.get("stream"))
        resp = None
        try:
            if stream:
                resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
                await resp.prepare(request)
            sent = 0
            while True:
                what, val = await q.get()
                if what == "first":
                    if stream:
                        ev = _chunk(kind, rid, served.model, [val], served.text.decode([val]), None)
                        await resp.write(f"data: {json.dumps(ev)}\n\n".encode())
                        sent = 1
                    continue
                tokens = list(val)
                cut = False
                if stop_ids:                        # stop_token_ids: the output ends at the first of them
                    for i, t in enumerate(tokens):
                        if t in stop_ids:
                            tokens, cut = tokens[:i + 1], True
                            break
                finish = served.finish_reason(r, tokens, cut)
                served.served += 1
                if stream:
                    rest = tokens[sent:]
                    ev = _chunk(kind, rid, served.model, rest, served.text.decode(rest), finish)
                    await resp.write(f"data: {json.dumps(ev)}\n\ndata: [DONE]\n\n".encode())
                    await resp.write_eof()
                    return resp
                usage = {"prompt_tokens": len(prompt), "completion_tokens": len(tokens),
                         "total_tokens": len(prompt) + len(tokens)}
                text = served.text.decode(tokens)
                choice = {"index": 0, "finish_reason": finish, "token_ids": tokens, "logprobs": None}
                if kind == "chat":
                    choice["message"] = {"role": "assistant", "content": text}
                    obj = "chat.completion"
                else:
                    choice["text"] = text
                    obj = "text_completion"
                return web.json_response({"id": rid, "object": obj, "created": int(time.time()), "model": served.model,
                                          "choices": [choice], "prompt_token_ids": prompt, "usage": usage})
        finally:
            served.waiting.pop(r.qid, None)

    async def completions(request):
        return await generate(request, "text")

    async def chat(request):
        return await generate(request, "chat")

    app = web.Application(client_max_size=MAX_BODY)
    app.add_routes([web.get("/health", health), web.get("/v1/models", models),
                    web.post("/v1/completions", completions), web.post("/v1/chat/completions", chat)])
    return app


def load_spec(path: str) -> dict:
    spec = json.loads(Path(path).read_text())
    for k in ("worker", "backend", "served_model", "tokenizer"):
        if k not in spec:
            raise ValueError(f"{path}: no {k!r}")
    return spec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spec", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    a = ap.parse_args(argv)
    from aiohttp import web

    from code.common.backends import get_backend
    from code.common.llm.backends import WorkerSpec

    spec = load_spec(a.spec)
    w = spec["worker"]
    worker = WorkerSpec(**{k: Sampling(**v) if k == "sampling" else tuple(v) if isinstance(v, list) else v
                           for k, v in w.items()})
    text = TokenText(spec["tokenizer"])
    served = Served(None, spec["served_model"], text, int(spec.get("max_new_tokens") or 1024))
    if worker.multimodal:
        from code.common.llm.vision import ChatInputs

        served.vision = ChatInputs(spec["tokenizer"])

    def load() -> None:             # beside the listening socket: /health says 503 until the model is ready
        try:
            served.proc = get_backend(spec["backend"]).processor(worker)
            served.start()
        except BaseException as e:  # noqa: BLE001 - the launcher reads this line from the log and exits
            print(f"[llm_server] error: the model did not load: {type(e).__name__}: {str(e)[:300]}", flush=True)
            os._exit(3)
    threading.Thread(target=load, daemon=True, name="load").start()
    print(f"[llm_server] {spec['served_model']} ({spec['backend']}, {worker.device}) on http://{a.host}:{a.port}",
          flush=True)
    web.run_app(make_app(served), host=a.host, port=a.port, print=None, handle_signals=True)
    if served.proc is not None:
        served.proc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
