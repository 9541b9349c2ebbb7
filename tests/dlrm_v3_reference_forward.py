"""The reference's own DLRM-v3 code on our tiny files, for tests/test_dlrm_v3.py: run with cwd =
recommendation/dlrm_v3 of the official tree and its torchrec / fbgemm_gpu stack importable.

  python dlrm_v3_reference_forward.py MODEL_DIR DATA_ROOT LAYOUT_JSON PER_TS OUT_JSON

Builds the reference's DlrmHSTU (generative_recommenders/modules/dlrm_hstu.py, its configs.get_hstu_configs with the
tiny dimensions of MODEL_DIR/config.json, tables as torchrec EmbeddingCollection on the CPU, the PyTorch kernels),
loads MODEL_DIR/hstu_tiny.pt into it by name (strict), reads the first PER_TS requests of every inference timestamp
with the reference's DLRMv3SyntheticStreamingDataset (load_item, collate_fn) and writes, per request, the reader's
feature values and the model's predictions at batch 1, and the predictions of each timestamp's requests as one batch.
"""
import json
import sys
from pathlib import Path

import torch

model_dir, data_root, layout, per_ts, out = (Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]),
                                             int(sys.argv[4]), Path(sys.argv[5]))
sys.path.insert(0, ".")
from configs import get_hstu_configs  # noqa: E402
from datasets.dataset import collate_fn  # noqa: E402
from datasets.synthetic_streaming import DLRMv3SyntheticStreamingDataset  # noqa: E402
from generative_recommenders.common import HammerKernel  # noqa: E402
from generative_recommenders.modules.dlrm_hstu import DlrmHSTU  # noqa: E402
from torchrec.modules.embedding_configs import DataType, EmbeddingConfig  # noqa: E402
from torchrec.modules.embedding_modules import EmbeddingCollection  # noqa: E402

tiny = json.loads((model_dir / "config.json").read_text())
c = get_hstu_configs()
for ours, theirs in (("num_heads", "hstu_num_heads"), ("attn_linear_dim", "hstu_attn_linear_dim"),
                     ("attn_qk_dim", "hstu_attn_qk_dim"), ("num_layers", "hstu_attn_num_layers"),
                     ("table_dim", "hstu_embedding_table_dim"), ("preprocessor_hidden_dim", "hstu_preprocessor_hidden_dim"),
                     ("transducer_dim", "hstu_transducer_embedding_dim"), ("max_seq_len", "max_seq_len"),
                     ("max_num_candidates_inference", "max_num_candidates_inference")):
    setattr(c, theirs, tiny[ours])
features = {"item_id": ["item_id", "item_candidate_id"],
            "item_category_id": ["item_category_id", "item_candidate_category_id"], "user_id": ["user_id"]}
rows = {"item_id": tiny["num_items"], "item_category_id": tiny["num_categories"], "user_id": tiny["num_users"]}
tables = {n: EmbeddingConfig(num_embeddings=rows[n], embedding_dim=tiny["table_dim"], name=n, data_type=DataType.FP32,
                             feature_names=f) for n, f in features.items()}
model = DlrmHSTU(hstu_configs=c, embedding_tables=tables, is_inference=True)
model._embedding_collection = EmbeddingCollection(tables=list(tables.values()), need_indices=False,
                                                  device=torch.device("cpu"))
model.recursive_setattr("_hammer_kernel", HammerKernel.PYTORCH)
model.load_state_dict(torch.load(model_dir / "hstu_tiny.pt", map_location="cpu"), strict=True)
model.eval()

ds = DLRMv3SyntheticStreamingDataset(
    hstu_config=c, ratings_file_prefix=str(data_root / layout["prefix"]) + "/", is_inference=True,
    train_ts=layout["train_ts"], total_ts=layout["total_ts"], num_files=layout["num_files"],
    num_users=layout["num_users"], num_items=layout["num_items"], num_categories=layout["num_categories"])
ds.is_inference = True


def predict(items):
    b = collate_fn(items)
    with torch.inference_mode():
        return model(b.uih_features_kjt, b.candidates_features_kjt)[3].reshape(-1).tolist()


res = {"samples": [], "batches": []}
for t in range(layout["total_ts"] - layout["train_ts"]):
    ds.set_ts(layout["train_ts"] + t)
    items = [ds.load_item(ds.iloc(q), c.max_num_candidates_inference) for q in range(per_ts)]
    for q, (uih, cand) in enumerate(items):
        res["samples"].append({"ts_idx": t, "query_idx": q, "preds": predict([(uih, cand)]),
                               "uih": {k: uih[k].values().tolist() for k in uih.keys()},
                               "cand": {k: cand[k].values().tolist() for k in cand.keys()}})
    res["batches"].append({"ts_idx": t, "queries": list(range(per_ts)), "preds": predict(items)})
out.write_text(json.dumps(res))
print(f"reference DlrmHSTU: {len(res['samples'])} requests, {len(res['batches'])} batches")
