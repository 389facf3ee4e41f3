"""Ultralytics YOLO models built from the yaml files the package ships (`DetectionModel("yolov8n.yaml")`
style: the real n-scale architecture with random weights, nothing downloaded), on one 320x320
image. Their heads cache anchors and strides on the module the first time `forward` sees a
shape (issue 39's state-caching kind); the classifier has no such head (the control).

Ultralytics is not in the project's venv: install it apart (`pip install --target DIR
ultralytics ...`) and put DIR on PYTHONPATH. `offline_env` keeps it from reaching the network
(settings checks, font downloads) so that a run cannot hang on it."""

from __future__ import annotations

import importlib
import os
import tempfile

import torch

from .spec import CONTROL, STATE_CACHING, Built, Spec

PACKAGE = "ultralytics"
IMAGE = 320  # a multiple of the largest stride (32); not the 256 the model's init ran at


def offline_env() -> dict[str, str]:
    """Environment for a child that imports ultralytics: offline, settings in a temp folder."""
    return {
        "YOLO_OFFLINE": "1",
        "YOLO_VERBOSE": "False",
        "YOLO_CONFIG_DIR": os.path.join(tempfile.gettempdir(), "real-models-ultralytics"),
    }


def yolo(task: str, yaml: str) -> Built:
    """The model of `task` ("detect" | "segment" | "pose" | "obb" | "classify") from `yaml`, in
    eval mode, with one random 320x320 RGB image in [0, 1] (what its preprocessing gives)."""
    os.environ.update(offline_env())
    tasks = importlib.import_module("ultralytics.nn.tasks")  # not in the venv: no stubs to check against

    classes = {
        "detect": tasks.DetectionModel,
        "segment": tasks.SegmentationModel,
        "pose": tasks.PoseModel,
        "obb": tasks.OBBModel,
        "classify": tasks.ClassificationModel,
    }
    model = classes[task](yaml, verbose=False).eval()
    return model, (torch.rand(1, 3, IMAGE, IMAGE),), {}


def _spec(name: str, task: str, what: str) -> Spec:
    kind = CONTROL if task == "classify" else STATE_CACHING
    return Spec(
        name, PACKAGE, __name__, kind, f"{what} from {name}.yaml; 320x320 image", lambda: yolo(task, f"{name}.yaml")
    )


SPECS = [
    _spec("yolov8n", "detect", "DetectionModel"),
    _spec("yolo11n", "detect", "DetectionModel"),
    _spec("yolov10n", "detect", "DetectionModel (v10Detect, one-to-one head)"),
    _spec("yolo12n", "detect", "DetectionModel (area attention)"),
    _spec("yolov8n-seg", "segment", "SegmentationModel"),
    _spec("yolov8n-pose", "pose", "PoseModel"),
    _spec("yolov8n-obb", "obb", "OBBModel"),
    _spec("yolov8n-cls", "classify", "ClassificationModel"),
]
