"""MLPerf 3D-UNet (KiTS19) constants: the reference's case list, checksums and pre/post-processing values.

Sources (data, not code):
  * mlcommons/inference @ b66003e1, vision/medical_imaging/3d-unet-kits19/:
    meta/inference_cases.json (INFERENCE_CASES), meta/checksum_inference.json (PREPROCESSED_MD5: md5 of
    the preprocessed ``case_XXXXX.pkl`` files, i.e. the OUTPUT of preprocess.py, not the raw KiTS19
    files) and global_vars.py (normalisation, spacing, ROI, overlap).
  * neheller/kits19 @ 456b2934: data/case_XXXXX/segmentation.nii.gz are plain git blobs;
    SEGMENTATION_BLOBS are their git blob ids and sizes (``git ls-tree -l``). The imaging files are
    not in git: starter_code/get_imaging.py fetches them from the Hugging Face dataset
    neheller/KiTS-Challenge-Imaging (images/case_XXXXX.nii.gz), whose LFS sha256 the Hub API reports.
  * The reference duplicates case_00185 as case_00400 (its Makefile, duplicate_kits19_case_00185).

The case list has 43 entries, the round table's dataset size for 3d-unet (43): no difference.
"""
from __future__ import annotations

INFERENCE_COMMIT = "b66003e10e2db4b8c36a448b0545ec90fcc6e9e9"
KITS19_COMMIT = "456b293435b25303bbc7995f094f83a0afdff0eb"
HF_IMAGING_REPO = "neheller/KiTS-Challenge-Imaging"
HF_IMAGING_REVISION = "main"
DUPLICATES = {"case_00400": "case_00185"}

INFERENCE_CASES = (
    "case_00000", "case_00003", "case_00005", "case_00006", "case_00012", "case_00024",
    "case_00034", "case_00041", "case_00044", "case_00049", "case_00052", "case_00056",
    "case_00061", "case_00065", "case_00066", "case_00070", "case_00076", "case_00078",
    "case_00080", "case_00084", "case_00086", "case_00087", "case_00092", "case_00111",
    "case_00112", "case_00125", "case_00128", "case_00138", "case_00157", "case_00160",
    "case_00161", "case_00162", "case_00169", "case_00171", "case_00176", "case_00185",
    "case_00187", "case_00189", "case_00198", "case_00203", "case_00206", "case_00207",
    "case_00400",
)

# git blob id (sha1 of "blob <size>\0" + bytes) and size of data/<case>/segmentation.nii.gz in kits19
SEGMENTATION_BLOBS = {
    "case_00000": ("495b190cbb27fafb41fdf59df89843e54d0ba99b", 775587),
    "case_00003": ("a0512b7097b94f0b65723e72f52250b7f4f343d2", 379402),
    "case_00005": ("8cec7b6620f40479cf63f0f62e6c939029001bc5", 1041381),
    "case_00006": ("54b68232fd8eee2509db66835e0c69560cfa1675", 249476),
    "case_00012": ("8c7ecc58bab44936ccabebb032b5264c5f066191", 140964),
    "case_00024": ("4c2f1d9eee7ea0cb72a61350d81c43e53f65eca6", 135119),
    "case_00034": ("d8b328b442eb3d422baeea8a300a1f61e6d2b01f", 174017),
    "case_00041": ("9413e8606d35d72f7f910d8b499e90693b0ad8ed", 103314),
    "case_00044": ("fa51c669f0f4dd4d37fd49135bc828c2163cd16b", 152896),
    "case_00049": ("be6731120210e566f9ec74b626d27053e7bd650e", 896777),
    "case_00052": ("ad6c8ef1e2f724d7b62d067aa5275a6349626b3e", 860917),
    "case_00056": ("9d3a99b907da3f4941f17741e24a17759c146461", 182198),
    "case_00061": ("3cbe29412ea44af170c59eab94cd5029f742502f", 59432),
    "case_00065": ("04b84f68bd09957223f1319da659e4e00de7492b", 190388),
    "case_00066": ("f93de57b5373dc7b975381394f958cf859436cad", 597100),
    "case_00070": ("ae8f4daaee6adaed24b1b0817a479e9854f46685", 126108),
    "case_00076": ("aee85862beb05471cfbd260a06b9ac4af50a7f30", 105766),
    "case_00078": ("5d80b8db1b0a5478aa94b5b7e731f9d7a391b646", 538585),
    "case_00080": ("c78414eb7487894e6e150f3933463a072325baa6", 137429),
    "case_00084": ("620a97995525753ca8b01f05541d3ed7a385efa3", 394399),
    "case_00086": ("5e44f7cccb1e9e8e7320f84b9acd0cb196c4dbf5", 301891),
    "case_00087": ("2878eaca6056d7c2f5d875ace550359f4b747bbf", 97327),
    "case_00092": ("15a9a58e8883caddb010421cfc53fe405185cadd", 196674),
    "case_00111": ("08861f132f920c4907b5b7c9e8e1fea797ab0589", 292498),
    "case_00112": ("efee1bf6c9e635c69a55a0a0a5771a98d9b74a42", 227812),
    "case_00125": ("5a9386057a2947a7f931b1699b45dc10dd4b297c", 113159),
    "case_00128": ("d8ad626e8dec0459b38e5c26540fa0b449efdd76", 307906),
    "case_00138": ("5ea6ed5aae0b0f0e2370a356fb40df1309419eb2", 155518),
    "case_00157": ("5b9dc12d6f46657e518ef718bc51e9466358e0c1", 344893),
    "case_00160": ("333d73b36e91f6aa4ff9ead98a2de79cb45e7a5f", 723271),
    "case_00161": ("8cf696ba9fbe1df28362a7c27c2f507bf10f4e20", 97779),
    "case_00162": ("be037e08c12f0ea4297b507748b3b8c55d1d87b3", 147257),
    "case_00169": ("5195127adc36e7894732e9c45132bbb1dc681dcf", 155606),
    "case_00171": ("da5a5c6c230690f6ae25a145dfd6325af92d2a52", 190618),
    "case_00176": ("06c9d5da6d97ccf60dad483829de91c0f206d18c", 76102),
    "case_00185": ("6ed13ea20c8a5f3c4181db4cfc601d1c27e2b2c5", 355129),
    "case_00187": ("8244e6ec03652e1f389726090db08a1058173247", 151948),
    "case_00189": ("8caed785b63ae80e8991d319a881d9e2d1722d1c", 237456),
    "case_00198": ("189bade0412c6e8fcea9902c4b283bb1d1ce1bd9", 384016),
    "case_00203": ("26d5ffeb676a4c3e72fef253580c67df3022d625", 805887),
    "case_00206": ("0da069e7bf4475ffc3f7767665ace09062da1bdd", 94798),
    "case_00207": ("99f7ef24523ef1f7e1315f3e2f3f8c416f93da6b", 207255),
}

# md5 of the reference preprocess.py's output pickles (meta/checksum_inference.json)
PREPROCESSED_MD5 = {
    "case_00000": "470ec60377be417a9c271ffd81c1d610",
    "case_00003": "a5536433cf1c01aaa8c4293ef59a826c",
    "case_00005": "dbb4141573d72278c1724debe16311f5",
    "case_00006": "4a81aa95c7a7613138d9c148eea05a66",
    "case_00012": "a4f576fd327ba35242802b01f204dede",
    "case_00024": "f0c24290a38491c3a3901e389df345bc",
    "case_00034": "a40e1ef70291072b4790f2d3056972cc",
    "case_00041": "4ddaf586d0a7ea7f55491f9ec776ad24",
    "case_00044": "b7b2e115ed7fcd3e0e757ff8ac164733",
    "case_00049": "0b7d71d0c11458a602d71490449943d3",
    "case_00052": "7fd78f6dd694fe90ff6b5332c6c30f19",
    "case_00056": "1ff976858ecd43a9045b2c571ac18b42",
    "case_00061": "f631a2edb275f4fa2bc662c210dc29e2",
    "case_00065": "c7d63dc01cf8ca5c08075c0dee7fd9ae",
    "case_00066": "d3741a5f717ca978f3bb49fabd2d6651",
    "case_00070": "347b40ea5c3e30a8e313f6fad5504acd",
    "case_00076": "d572f849e8de3e352009f7156f0988ce",
    "case_00078": "de564386f95f97c9c276e11883acb018",
    "case_00080": "23cd0e88a3c1f7995082137bb7d5ab7b",
    "case_00084": "2a61a63abff567c4b107efeec24528ad",
    "case_00086": "69453d214225bcc67417c1726b1c6f31",
    "case_00087": "3ef7fc6c59b3a629fb4feddca92825f0",
    "case_00092": "4da4423b41cc606f42ad40fa769229af",
    "case_00111": "9f43e5824fd5459bfa7d523197346003",
    "case_00112": "18b9a976fd0683990a997241f1f6c588",
    "case_00125": "10c8971914f9d7beb66ff2d5e87f3bf4",
    "case_00128": "f1c1d420474ad5254ffdd6d8fbaffaa9",
    "case_00138": "8661d26af4271de29fb8593d1da3f195",
    "case_00157": "55a47901624695e3aacd9b0fb8467555",
    "case_00160": "0b1b2d50203070898af64ac6457c7568",
    "case_00161": "0e4b57e587e36042d5473de11d1792c2",
    "case_00162": "89f53aac7e1a421505f9b6cacdc5f09e",
    "case_00169": "f6c0594e20016e2b5086eae22963d051",
    "case_00171": "00a2700e3ff23896d7fd1ca5a30ddf6a",
    "case_00176": "430f5f2da6247f52b68346d549ed672e",
    "case_00185": "2ae858449b63e2fe4466c29087540e9c",
    "case_00187": "15022874121b70aa7f5f18d1a197816b",
    "case_00189": "966297c3adc7766655e050220b840dee",
    "case_00198": "cbfbd56f5c1a2570cc9d73c9fad8222a",
    "case_00203": "f82f9adab8d3ea22391a2e9af5572288",
    "case_00206": "0e59b9a2ef5bd4549938a97d136b06a8",
    "case_00207": "4c437995fb990736385e0dc2241255aa",
    "case_00400": "2ae858449b63e2fe4466c29087540e9c"

}

# global_vars.py
MEAN_VAL = 101.0
STDDEV_VAL = 76.9
MIN_CLIP_VAL = -79.0
MAX_CLIP_VAL = 304.0
PADDING_VAL = -2.2
TARGET_SPACING = (1.6, 1.2, 1.2)
SLIDE_OVERLAP_FACTOR = 0.5
NUM_CLASSES = 3          # background, kidney, tumour
