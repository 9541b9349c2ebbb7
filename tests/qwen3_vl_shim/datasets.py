"""A stand-in for Hugging Face ``datasets.load_dataset`` where that package is not installed (datasets 5 needs a newer
pyarrow than this project pins): the official Qwen3-VL scorer (multimodal/qwen3-vl evaluation.py) calls
``load_dataset(repo_id, token=..., split="train+test")`` and reads rows by index; here ``repo_id`` is a local folder
in the Hub's Parquet layout (data/<split>-*.parquet), read with pyarrow, the splits concatenated in the order named.
Used by tests/test_qwen3_vl.py only, on PYTHONPATH of the official scorer's subprocess."""
from pathlib import Path


def load_dataset(path, token=None, split="train", revision=None, **_):
    import pyarrow.parquet as pq

    rows = []
    for name in str(split).split("+"):
        files = sorted(Path(path).glob(f"data/{name}-*.parquet"))
        if not files:
            raise FileNotFoundError(f"no data/{name}-*.parquet in {path}")
        for f in files:
            rows.extend(pq.read_table(f).to_pylist())
    return rows
