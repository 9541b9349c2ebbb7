"""YOLOv11l object detection (MLPerf "yolo-95" / "yolo-99", rounds v6.0 on, edge: SingleStream, MultiStream,
Offline): COCO val2017 "safe" subset of 1,525 images, letterboxed to 640x640, 80 classes reported as COCO
category ids; mAP (pycocotools) >= 53.4 x 0.95 / x 0.99 (the checker's 50.73 / 52.866). Lightweight: no
heavy imports.

The work is in ``code.yolo.harness:YoloBenchmark``. Accuracy variants yolo-95 / yolo-99 come from the round
table (``--accuracy_target=95`` or ``99``, default 99). TEST01 is the round's audit (no TEST04).

No ultralytics dependency. The reference (vision/classification_and_detection/yolo/yolo_loadgen.py) runs
``ultralytics.YOLO(model).predict``; ultralytics is AGPL-3.0, and a harness that imports it would have to
be distributed under the AGPL. So the detector is built here from torch modules in YOLOv11 shape
(``code.yolo.model``: C3k2, SPPF, C2PSA, DFL Detect head, with ultralytics' state_dict key layout) and the
MLCommons ``yolo11l.pt`` is loaded into it without importing ultralytics (its pickled classes are replaced
by empty modules while unpickling). Letterbox, box decoding and NMS are re-implemented from the reference's
parameters (ultralytics 8.4.190 read for them: LetterBox, non_max_suppression, scale_boxes), with cv2 and
torchvision doing the work, and checked in tests/test_yolo.py against independent cv2 code (and against
ultralytics itself when it happens to be importable; it is never installed by this project).

One difference from the reference, on purpose: ``YOLO.predict`` on a ``.pt`` model letterboxes each image
to its minimum rectangle (``auto=True``: long side 640, short side padded to a multiple of 32), while this
harness letterboxes every image to the fixed 640x640 square, as ultralytics does for fixed-shape exported
engines (ONNX/TensorRT: ``auto=False``) and as the issue asks; the padding holds the value 114 either way.
"""
from code.common.benchmark import BenchmarkSpec

SPEC = BenchmarkSpec(
    name="yolo",
    mlperf_name="yolo",
    loadgen_model="yolo",
    aliases=("yolo-95", "yolo-99", "yolov11", "yolo11", "yolo11l", "yolov11l"),
    scenarios=("Offline", "SingleStream", "MultiStream"),
    impl="code.yolo.harness:YoloBenchmark",
    precisions=("fp32", "fp16", "int8"),
    starting_weights="yolo11l.pt (MLCommons R2 yolo_model, the ultralytics YOLOv11l checkpoint)",
    input_data_types={"int8": "int8", "fp16": "fp16"},
    scratch_gb=5,                 # model + 1,525 images + preprocessed uint8 640x640 arrays
)
