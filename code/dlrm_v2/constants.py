"""DLRM-v2 (DLRM-DCNv2, multi-hot Criteo 1TB) facts from the MLCommons reference
(recommendation/dlrm_v2/pytorch: README.md, python/main.py, python/multihot_criteo.py,
tools/dist_quantile.txt, tools/accuracy-dlrm.py). Rules (sizes, targets, audits) are the round table's."""
from __future__ import annotations

# --- model (python/main.py, dataset "multihot-criteo": the BackendPytorchNative arguments) ----------------
NUM_EMBEDDINGS = (40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10,
                  2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36)
EMBEDDING_DIM = 128
DENSE_ARCH = (512, 256, 128)
OVER_ARCH = (1024, 1024, 512, 256, 1)
DCN_LAYERS = 3
DCN_LOW_RANK = 512
NUM_DENSE = 13
NUM_SPARSE = 26
# the multi-hot sizes of the synthetic multi-hot Criteo set (tools/make_fake_criteo.sh, and the training
# reference's materialize_synthetic_multihot_dataset.py --multi_hot_sizes): lookups per table per item
MULTI_HOT_SIZES = (3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1)

# --- data (python/multihot_criteo.py, "multihot-criteo") -------------------------------------------------
DAY = 23
DENSE_FILE = f"day_{DAY}_dense.npy"                    # float32 (rows, 13): already log(x + 3) (torchrec preprocessing)
SPARSE_FILE = f"day_{DAY}_sparse_multi_hot.npz"        # members "0.npy".."25.npy": int32 (rows, MULTI_HOT_SIZES[k]), stored
LABELS_FILE = f"day_{DAY}_labels.npy"                  # int32 (rows, 1)
DATA_FILES = (DENSE_FILE, SPARSE_FILE, LABELS_FILE)
DAY23_ROWS = 178274637                                  # README: the validation set is its first half
TRACE_FILE = "dlrm_trace_of_aggregated_samples.txt"    # "<start>, <end>, <count>" per aggregated query
QUANTILE_SEED = 123                                     # main.py --numpy-rand-seed: np.random.seed before the mapping
# tools/dist_quantile.txt: the query-length quantile (inverse CDF at 0.05 steps) sampled per user query
QUANTILE = (100, 100, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 300, 300, 400, 500, 600, 700)

# --- downloads (README: MLCommons R2 downloader) ----------------------------------------------------------
MODEL_URI = "https://inference.mlcommons-storage.org/metadata/dlrm-v2-model-weights.uri"
DATASET_URI = "https://inference.mlcommons-storage.org/metadata/dlrm-v2-preprocessed-dataset.uri"
CHECKPOINT_BYTES = int(97.31e9)                         # README: "pytorch | 97.31GB"
DISK_MARGIN_BYTES = 5 * 10**9                           # room for the staged partial file and the md5 list
# day_23 dense 178274637x13x4 + labels x4 + multi-hot 214 int32 per row (the reference's three files)
DATASET_BYTES = DAY23_ROWS * (NUM_DENSE * 4 + 4 + sum(MULTI_HOT_SIZES) * 4)
TRAINING_REFERENCE = ("https://github.com/mlcommons/training/tree/master/recommendation_v2/torchrec_dlrm"
                      "#create-the-synthetic-multi-hot-dataset")
