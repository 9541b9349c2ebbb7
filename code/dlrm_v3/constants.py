"""DLRM-v3 facts from the reference (recommendation/dlrm_v3 of mlcommons/inference: README.md, configs.py,
utils.py get_dataset, datasets/synthetic_streaming.py, checkpoint.py, main.py)."""
from __future__ import annotations

# README "Dataset download" / "Model download": the MLCommons R2 metadata the official downloader reads (it checks
# every file against the md5 list published beside the .uri)
DATASET_URI = "https://inference.mlcommons-storage.org/metadata/dlrm-v3-dataset.uri"
CHECKPOINT_URI = "https://inference.mlcommons-storage.org/metadata/dlrm-v3-checkpoint.uri"
CHECKPOINT_BYTES = 1_000_000_000_000     # "the 1TB trained checkpoint"
DATA_GENERATION = "python recommendation/dlrm_v3/streaming_synthetic_data.py (2 TB; 1% of it is the sampled set)"

# utils.get_dataset("sampled-streaming-100b"): the inference data set
SAMPLED = dict(prefix="sampled_data/", train_ts=90, total_ts=100, num_files=1, num_users=50_000,
               num_items=1_000_000_000, num_categories=128)
# the CSV files the reader opens under the prefix (datasets/synthetic_streaming.py)
INDEX_FILES = ("offset.csv", "requests_per_ts_offset.csv", "users_cumsum_per_ts.csv", "requests_per_ts.csv")

# configs.get_hstu_configs / get_embedding_table_config: the real model
HASH_SIZE = 1_000_000_000
REAL = dict(num_heads=4, attn_linear_dim=128, attn_qk_dim=128, num_layers=5, table_dim=512,
            preprocessor_hidden_dim=256, transducer_dim=512, mlp_hidden=512, action_weights=(1, 2, 4, 8, 16),
            action_embedding_dim=8, num_items=HASH_SIZE, num_categories=128, num_users=10_000_000,
            max_seq_len=16384, max_num_candidates_inference=2048, contextual_min_uih_len=20,
            num_position_buckets=8192, num_time_buckets=2048)
# checkpoint.py: <path>/non_sparse.ckpt (torch.save, "dense_dict") and <path>/sparse/ (torch.distributed.checkpoint)
NON_SPARSE = "non_sparse.ckpt"
SPARSE_DIR = "sparse"

# datasets/synthetic_streaming.py load_item: a candidate is positive when its rating is >= 3.5; the one task
# ("rating", binary, task_weight 1) reads bit 1 of that; every candidate weighs 1
POSITIVE_RATING = 3.5

# checker ACC_PATTERN: the lines accuracy.txt carries (utils.MetricsLogger key "metric/<prefix><name>/<task>")
METRIC_LINES = {"DLRM_NE": "metric/lifetime_ne/rating", "DLRM_ACC": "metric/lifetime_accuracy/rating",
                "DLRM_AUC": "metric/lifetime_gauc/rating"}

TINY_SEED = 20261206
# the tiny HSTU: small dimensions and tables; what the reference fixes in code (the 512-wide item and prediction
# MLPs, 8-dim action embeddings, 8192 position and 2048 time buckets) as the reference has it
TINY = dict(num_heads=2, attn_linear_dim=8, attn_qk_dim=8, num_layers=2, table_dim=16, preprocessor_hidden_dim=16,
            transducer_dim=16, mlp_hidden=512, action_weights=(1, 2, 4, 8, 16), action_embedding_dim=8,
            num_items=4096, num_categories=16, num_users=64, max_seq_len=256, max_num_candidates_inference=32,
            contextual_min_uih_len=20, num_position_buckets=8192, num_time_buckets=2048)
# the tiny streaming set: 64 users over 8 timestamps, the last 3 the inference ones (3 x ~32 requests)
TINY_DATA = dict(prefix="sampled_data/", train_ts=5, total_ts=8, num_files=1, num_users=64, num_items=4096,
                 num_categories=16)
TINY_LABEL_FLIP = 0.12        # tiny labels: the tiny model's own decision at 0.5, this share flipped (seeded)
