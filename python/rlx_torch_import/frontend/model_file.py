"""Load `model` + `example_inputs` from a user's Python file (the CLI's MODEL.py)."""

from __future__ import annotations

import runpy
import traceback
from pathlib import Path
from typing import Any

from ..errors import ModelLoadError

FACTORIES = ("get_model", "build")


def _where(exc: BaseException, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path.resolve()]
    return f" (line {frames[-1].lineno}: {frames[-1].line})" if frames else ""


def load_model_file(path: str | Path) -> tuple[Any, Any, dict[str, Any] | None]:
    """Run the file and return `(model, example_inputs, example_kwargs)`, or raise ModelLoadError
    saying why not. `example_kwargs` (keyword arguments of the call) is optional: a module-level
    `example_kwargs`, or a third item returned by get_model()/build()."""
    import torch

    path = Path(path)
    if path.is_dir():
        raise ModelLoadError(f"model file {path} is a directory", hint="pass the path of a .py file")
    if not path.is_file():
        raise ModelLoadError(f"model file {path} does not exist", hint="pass the path of a .py file")
    if path.suffix != ".py":
        raise ModelLoadError(f"model file {path} is not a .py file")
    try:
        namespace = runpy.run_path(str(path), run_name="__rlx_torch_import__")
    except Exception as e:  # the user's code can raise anything
        raise ModelLoadError(
            f"running {path} raised {type(e).__name__}: {e}{_where(e, path)}",
            hint="the file must run on its own (python MODEL.py) and define the model",
        ) from e
    for factory in FACTORIES:
        if callable(namespace.get(factory)):
            try:
                result = namespace[factory]()
            except Exception as e:
                raise ModelLoadError(f"{path}: {factory}() raised {type(e).__name__}: {e}{_where(e, path)}") from e
            if not (isinstance(result, tuple) and len(result) in (2, 3)):
                raise ModelLoadError(
                    f"{path}: {factory}() returned {type(result).__name__}, expected (model, example_inputs) "
                    "or (model, example_inputs, example_kwargs)"
                )
            model, example_inputs, kwargs = result if len(result) == 3 else (*result, None)
            break
    else:
        missing = [n for n in ("model", "example_inputs") if n not in namespace]
        if missing:
            raise ModelLoadError(
                f"{path} defines no {' and no '.join(repr(m) for m in missing)}",
                hint="define module-level `model` and `example_inputs`, or a get_model()/build() "
                "function returning (model, example_inputs)",
            )
        model, example_inputs = namespace["model"], namespace["example_inputs"]
        kwargs = namespace.get("example_kwargs")
    if not isinstance(model, torch.nn.Module):
        raise ModelLoadError(
            f"{path}: `model` is a {type(model).__name__}, not a torch.nn.Module",
            hint="instantiate the module: model = MyNet(), not model = MyNet",
        )
    if kwargs is not None and not isinstance(kwargs, dict):
        raise ModelLoadError(f"{path}: `example_kwargs` is a {type(kwargs).__name__}, not a dict")
    return model, example_inputs, kwargs
