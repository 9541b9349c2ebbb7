"""The Shopify product catalogue as the reference reads it (``multimodal/qwen3-vl/src/mlperf_inf_mm_q3vl``:
task.py ``ShopifyGlobalCatalogue.formulate_loaded_sample``, evaluation.py ``run_evaluation``, schema.py
``ProductMetadata``).

The data set is a Hugging Face data set repository in Parquet (``data/train-*.parquet``, ``data/test-*.parquet``);
the reference concatenates the ``train`` and ``test`` splits in that order (48,289 rows; the Interactive 8k subset
likewise). Columns read: ``product_image`` ({bytes, path}: a JPEG/PNG/... file), ``product_title``,
``product_description``, ``potential_product_categories`` (a list of " > " paths) and, to score,
``ground_truth_category``, ``ground_truth_brand``, ``ground_truth_is_secondhand``.

A sample is two chat messages: the reference's system prompt (with the JSON schema of the answer) and a user
message holding the product's text and then its image as an ``image_url`` data URL. The image bytes are what the
reference sends: PIL opens the file and saves it again in its own format (``image/<PIL format>;base64,...``).

The tiny set has the same files and columns: seeded synthetic products (a drawn image, words for the title and
description, four candidate paths of three levels) whose ground truth is written after the tiny model answered
(``harness``: three samples in four take plain generate's parsed answer, partly or whole).
"""
from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from code.common.errors import MissingDataError

SPLITS = ("train", "test")                  # schema.py Dataset.split: concatenated in this order
COLUMNS = ("product_image", "product_title", "product_description", "potential_product_categories")
TRUTH = ("ground_truth_category", "ground_truth_brand", "ground_truth_is_secondhand")
SEPARATOR = " > "

# json.dumps(ProductMetadata.model_json_schema(), indent=2) as the reference's pydantic prints it (schema.py;
# tests/test_qwen3_vl.py renders the reference's own prompt and compares)
ANSWER_SCHEMA = {
    "additionalProperties": False,
    "description": "Json format for the expected responses from the VLM.",
    "properties": {
        "category": {"description": "The complete category of the product, e.g.,\n\"Clothing & Accessories > Clothing "
                                    "> Shirts > Polo Shirts\".\nEach categorical level is separated by \" > \".",
                     "title": "Category", "type": "string"},
        "brand": {"description": "The brand of the product, e.g., \"giorgio armani\".", "title": "Brand",
                  "type": "string"},
        "is_secondhand": {"description": "True if the product is second-hand, False otherwise.",
                          "title": "Is Secondhand", "type": "boolean"},
    },
    "required": ["category", "brand", "is_secondhand"],
    "title": "ProductMetadata",
    "type": "object",
}

SYSTEM_PROMPT = f"""Please analyze the product from the user prompt
and provide the following fields in a valid JSON object:
- category
- brand
- is_secondhand

You must choose only one, which is the most appropriate, correct, and specifc
category out of the list of possible product categories.

The description of the product sometimes contains various types of source code
(e.g., JavaScript, CSS, HTML, etc.), where useful product information is embedded
somewhere inside the source code. For this task, you should extract the useful
product information from the source code and leverage it, and discard the
programmatic parts of the source code.

Your response should only contain a valid JSON object and nothing more, e.g.,
you should not fence the JSON object inside a ```json code block.
The JSON object should match the followng JSON schema:
```json
{json.dumps(ANSWER_SCHEMA, indent=2)}
```
"""

USER_TEXT = """The title of the product is the following:
```text
{title}
```

The description of the product is the following:
```text
{description}
```

The following are the possible product categories:
```json
{categories}
```
"""


# --- reading ------------------------------------------------------------------------------------------

def split_files(folder: Path, split: str) -> list[Path]:
    """The Parquet shards of one split, as the Hub lays them out (``data/<split>-00000-of-0000N.parquet``)."""
    folder = Path(folder)
    return sorted([*folder.glob(f"data/{split}-*.parquet"), *folder.glob(f"{split}-*.parquet")])


def read(folder: Path, fix: str, columns: Sequence[str] = (*COLUMNS, *TRUTH)) -> list[dict[str, Any]]:
    """Every row of the train then test splits in ``folder`` (a list of plain-Python dicts: lists stay lists, so a
    category list prints as the reference's f-string prints it)."""
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    found = False
    for split in SPLITS:
        for f in split_files(folder, split):
            found = True
            try:
                t = pq.read_table(f)
            except Exception as e:  # noqa: BLE001 - any unreadable file is the same user error
                raise MissingDataError(f"{f} is not a readable Parquet file ({type(e).__name__})", fix) from None
            missing = [c for c in columns if c not in t.column_names]
            if missing:
                raise MissingDataError(f"{f}: no column(s) {', '.join(missing)} (has {', '.join(t.column_names)})", fix)
            rows.extend(t.select(list(columns)).to_pylist())
    if not found:
        raise MissingDataError(f"dataset not found: no data/train-*.parquet or data/test-*.parquet in {folder}", fix)
    return rows


def image_file(row: dict) -> bytes:
    """The image file's bytes of a row (the Hub's Image feature stores {bytes, path})."""
    img = row["product_image"]
    data = img.get("bytes") if isinstance(img, dict) else img
    if not data:
        raise ValueError("a product_image without bytes")
    return bytes(data)


def resaved_image(row: dict) -> tuple[bytes, str]:
    """(bytes, PIL format) as the reference sends the image: opened by PIL and saved again in its own format."""
    from PIL import Image

    img = Image.open(io.BytesIO(image_file(row)))
    fmt = img.format
    out = io.BytesIO()
    img.save(out, format=fmt)
    return out.getvalue(), fmt


def user_text(row: dict) -> str:
    return USER_TEXT.format(title=row["product_title"], description=row["product_description"],
                            categories=row["potential_product_categories"])


def messages_for(text: str, image: bytes, fmt: str) -> list[dict]:
    """The two chat messages of one sample, as formulate_loaded_sample builds them (text first, then the image)."""
    url = f"data:image/{fmt};base64,{base64.b64encode(image).decode('utf-8')}"
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": [{"type": "text", "text": text},
                                         {"type": "image_url", "image_url": {"url": url}}]}]


def messages(row: dict) -> list[dict]:
    data, fmt = resaved_image(row)
    return messages_for(user_text(row), data, fmt)


# --- the tiny set ---------------------------------------------------------------------------------------

def tiny_rows(n: int, seed: int, categories: Sequence[str], brands: Sequence[str]) -> list[dict]:
    """``n`` seeded synthetic products: a drawn PNG or JPEG (a few sizes: the visual-token count varies), title and
    description of pseudo-words, four candidate paths from ``categories``, a brand and a second-hand flag. The
    ground truth is a placeholder until the tiny model has answered."""
    from PIL import Image, ImageDraw

    from code.common.llm.tiny import TextGen

    rng = np.random.default_rng(seed)
    g = TextGen(seed + 1)
    rows = []
    for i in range(n):
        w, h = [(64, 64), (96, 64), (64, 96), (128, 96)][i % 4]
        img = Image.new("RGB", (w, h), tuple(int(x) for x in rng.integers(0, 256, 3)))
        d = ImageDraw.Draw(img)
        for _ in range(4):
            x0, y0 = int(rng.integers(0, w - 8)), int(rng.integers(0, h - 8))
            d.rectangle([x0, y0, x0 + int(rng.integers(8, 40)), y0 + int(rng.integers(8, 40))],
                        fill=tuple(int(x) for x in rng.integers(0, 256, 3)))
        buf = io.BytesIO()
        fmt = "PNG" if i % 3 else "JPEG"
        img.save(buf, format=fmt)
        cands = [categories[int(j)] for j in rng.choice(len(categories), size=4, replace=False)]
        rows.append({"product_image": {"bytes": buf.getvalue(), "path": f"product_{i}.{fmt.lower()}"},
                     "product_title": g.sentence(3, 7).rstrip(".?"),
                     "product_description": g.paragraph(1 + i % 3),
                     "potential_product_categories": cands,
                     "ground_truth_category": cands[0], "ground_truth_brand": brands[i % len(brands)],
                     "ground_truth_is_secondhand": bool(i % 5 == 0)})
    return rows


def write(folder: Path, rows: Sequence[dict], test_share: float = 0.25) -> None:
    """``rows`` as the Hub lays the set out: ``data/train-00000-of-00001.parquet`` then the last quarter as
    ``data/test-00000-of-00001.parquet`` (read back in that order)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from code.common.fileio import staged_path

    cut = len(rows) - int(len(rows) * test_share)
    for split, part in (("train", rows[:cut]), ("test", rows[cut:])):
        path = Path(folder) / "data" / f"{split}-00000-of-00001.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        with staged_path(path) as tmp:
            pq.write_table(pa.Table.from_pylist(list(part)), tmp)
