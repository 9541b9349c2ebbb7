"""Write measured values into this system's block of a config.json, keeping the rest of the file as
it is (its other blocks, their order, comments-free JSON formatting and line breaks).

Only the one block's text is replaced (re-serialised on one line, the style of configs/); a missing
block is appended, extending the block the system reads today. Values go where they take effect
(``configs.resolve`` precedence): the block's ``model_variant.<variant>`` sub-block for a tiny run,
its ``config_ver.<ver>`` sub-block for a non-default config_ver, else the block itself. The result
is parsed and resolved again before it replaces the file.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from code.common.errors import HarnessError


def _top_level_spans(text: str) -> dict[str, tuple[int, int]]:
    """Top-level key -> (start, end) of its object value in ``text`` (end exclusive)."""
    spans: dict[str, tuple[int, int]] = {}
    depth, i, key, n = 0, 0, None, len(text)
    start = 0
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if depth == 1 and key is None:
                k = json.loads(text[i:j + 1])
                rest = text[j + 1:].lstrip()
                if rest.startswith(":"):
                    key = k
            i = j + 1
            continue
        if c == "{":
            if depth == 1 and key is not None:
                start = i
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 1 and key is not None:
                spans[key] = (start, i + 1)
                key = None
        i += 1
    return spans


def _place(block: dict, s, values: dict[str, Any]) -> None:
    if s.model_variant != "reference":
        target = block.setdefault("model_variant", {}).setdefault(s.model_variant, {})
    elif s.config_ver != "default":
        target = block.setdefault("config_ver", {}).setdefault(s.config_ver, {})
    else:
        target = block
    target.update(values)


def set_block(path: Path, name: str, block: dict) -> str:
    """Put top-level block ``name`` = ``block`` into the config file at ``path`` (replaced in place, or
    appended), every other line as it was; checked by parsing the result. Returns the new text
    (the caller writes it)."""
    from code.common.configs import load_file

    data, text = load_file(path)
    spans = _top_level_spans(text)
    if name in data:
        new = text[:spans[name][0]] + json.dumps(block, ensure_ascii=False) + text[spans[name][1]:]
    else:
        end = text.rstrip().rfind("}")
        body = text[:end].rstrip()
        new = f'{body},\n  "{name}": {json.dumps(block, ensure_ascii=False)}\n' + text[end:]
    expect = dict(data)
    expect[name] = block
    if json.loads(new) != expect:          # the surgery must change exactly that block
        raise HarnessError(f"{path}: could not rewrite block '{name}' in place", f"add it by hand: {json.dumps(block)}")
    return new


def write_values(s, values: dict[str, Any]) -> tuple[Path, str]:
    """Write ``values`` for RunSettings ``s``; returns (config path, block name)."""
    from code.common.benchmarks import registry
    from code.common.configs import config_path, load_file, pick_block, resolve
    from code.common.fileio import write_text

    path = config_path(s.benchmark, s.scenario)
    data, text = load_file(path)
    name = s.system_id
    if name in data:
        spans = _top_level_spans(text)
        block = json.loads(text[spans[name][0]:spans[name][1]])
    else:
        block = {"extends": pick_block({k: v for k, v in data.items()}, s.system, s.scenario, path)[0]}
    _place(block, s, values)
    write_text(path, set_block(path, name, block))
    got = resolve(s.spec, s.scenario, s.system, registry(), {"model_variant": s.model_variant}, s.config_ver,
                  {"backend": (s.backend, "")})[0]
    wrong = {k: got[k] for k, v in values.items() if got.get(k) != v}
    if wrong:
        raise HarnessError(f"{path}: wrote {values} into '{name}', but the config still resolves {wrong}",
                           "a more specific sub-block overrides them: edit it by hand")
    return path, name
