"""Issue 39's before/after on real architectures: a developer measurement, not a test.

Usage::

    python -m tools.real_models [--only NAME,...] [--json PATH] [--timeout S] [--work DIR] [--list]

Each model (`models.py`) is built from its own package's config with random weights, small but
the real architecture (few layers, small hidden sizes, torch seed 0), in eval mode, with
realistic example inputs: ultralytics YOLO v8/v10/11/12 detection, segmentation, pose, oriented
boxes and classification from the yaml files the package ships (`ultralytics_models.py`), and
transformers' Reformer, VITS, Idefics3, FNet, Informer, SpeechT5 and RT-DETR from their config
classes (`transformers_models.py`). A model whose package is not importable is reported as
"package missing" and not run.

Each model is converted with `rlx_torch_import.from_torch` (verified against eager PyTorch) into
a temp folder, in its own child process (`worker.py`) with a timeout, and gives one row: the
outcome (verified; FAIL with the first divergence; error class, first line of its message and
exit code; timeout; crashed) and the seconds the conversion took. The table is printed as
markdown and, with `--json`, written with the rows and the versions that made them.

Which rlx_torch_import runs is whichever Python imports (the header's "rti" says which; the run
stops when none is): `PYTHONPATH=python` measures this tree, `PYTHONPATH=/some/tree/python`
another. Ultralytics lives outside the project's venv: `pip install --target DIR ultralytics
ultralytics-thop opencv-python-headless ...` and add DIR to PYTHONPATH. For example::

    PYTHONPATH=python:/tmp/ultra python -m tools.real_models --json /tmp/after.json
    python -m tools.real_models --compare /tmp/before.json /tmp/after.json
"""
