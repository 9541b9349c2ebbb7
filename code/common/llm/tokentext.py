"""Token ids <-> text with a checkpoint's tokenizer: the harness's OpenAI-compatible server (code.common.llm.serve)
and the HTTP client (code.common.llm.openai_client, --llm_api=chat, --llm_token_ids=retokenize) both use it."""
from __future__ import annotations

import threading
from pathlib import Path


class Bad(ValueError):
    """A request that cannot be served (bad chat messages here, more in the server): answered 400 with the message."""


class TokenText:
    """Token ids <-> text with the checkpoint's tokenizer.json (the tokenizers library, no torch import); the
    chat template through transformers, loaded on the first chat request."""

    def __init__(self, folder: str):
        from tokenizers import Tokenizer

        self.folder = folder
        self.tok = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
        self._chat = None
        self._lock = threading.Lock()

    def encode(self, text: str, special: bool = True) -> list[int]:
        return self.tok.encode(text, add_special_tokens=special).ids

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids], skip_special_tokens=True)

    def chat(self, messages: list) -> list[int]:
        with self._lock:
            if self._chat is None:
                from transformers import AutoTokenizer

                self._chat = AutoTokenizer.from_pretrained(self.folder)
        if not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
            raise Bad("messages: objects with a text content")
        if not getattr(self._chat, "chat_template", None):     # the tiny tokenizers: the contents as plain text
            return self.encode("\n".join(m["content"] for m in messages))
        ids = self._chat.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) else ids)
