"""Load `model` + `example_inputs` from a user's Python file (the CLI's MODEL.py)."""

from __future__ import annotations

import os
import runpy
import traceback
from pathlib import Path
from typing import Any

from ...errors import ModelLoadError, describe
from ...timeout import user_code

FACTORIES = ("get_model", "build")


def _where(exc: BaseException, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path.resolve()]
    return f" (line {frames[-1].lineno}: {frames[-1].line})" if frames else ""


def _exit_error(exc: SystemExit, what: str, path: Path) -> ModelLoadError:
    return ModelLoadError(
        f"{what} called sys.exit({exc.code!r}){_where(exc, path)}",
        hint="a model file must define the model and return; put script code under "
        "`if __name__ == '__main__':` (rlx-torch-import runs the file under another name)",
    )


def load_model_file(path: str | Path, *, timeout: float | None = None) -> tuple[Any, Any, dict[str, Any] | None]:
    """Run the file and return `(model, example_inputs, example_kwargs)`, or raise ModelLoadError
    saying why not (the file raised, called `sys.exit()`, or defines no model). `example_kwargs`
    (keyword arguments of the call) is optional: a module-level `example_kwargs`, or a third item
    returned by get_model()/build(). With `timeout` (seconds), running the file and its factory
    each get that long, else TimeLimitError (`timeout.user_code`); Ctrl-C stays KeyboardInterrupt."""
    import torch  # noqa: F401  (imported before the clock starts: the limit is for the user's code)

    path = Path(path)
    with user_code(f"running {path}", timeout, file=path):
        namespace = _run_file(path)
    for factory in FACTORIES:
        if callable(namespace.get(factory)):
            with user_code(f"{path}: {factory}()", timeout, file=path):
                result = _call_factory(namespace[factory], factory, path)
            return _checked(path, *_unpack(result, factory, path))
    missing = [n for n in ("model", "example_inputs") if n not in namespace]
    if missing:
        raise ModelLoadError(
            f"{path} defines no {' and no '.join(repr(m) for m in missing)}",
            hint="define module-level `model` and `example_inputs`, or a get_model()/build() "
            "function returning (model, example_inputs)",
        )
    return _checked(path, namespace["model"], namespace["example_inputs"], namespace.get("example_kwargs"))


def _run_file(path: Path) -> dict[str, Any]:
    """The file's globals after running it (not as __main__). Raises ModelLoadError when it is not
    a .py file, raises, or calls sys.exit()."""
    if path.is_dir():
        raise ModelLoadError(f"model file {path} is a directory", hint="pass the path of a .py file")
    if not path.is_file():
        raise ModelLoadError(f"model file {path} does not exist", hint="pass the path of a .py file")
    if path.suffix != ".py":
        raise ModelLoadError(f"model file {path} is not a .py file")
    parent = os.getpid()
    try:
        return runpy.run_path(str(path), run_name="__rlx_torch_import__")
    except SystemExit as e:
        raise _exit_error(e, f"running {path}", path) from None
    except Exception as e:  # the user's code can raise anything
        raise ModelLoadError(
            f"running {path} raised {describe(e)}{_where(e, path)}",
            hint="the file must run on its own (python MODEL.py) and define the model",
        ) from e
    finally:
        if os.getpid() != parent:  # the file called os.fork(): its child must not convert a second time
            os._exit(0)


def _call_factory(factory: Any, name: str, path: Path) -> Any:
    try:
        return factory()
    except SystemExit as e:
        raise _exit_error(e, f"{path}: {name}()", path) from None
    except Exception as e:
        raise ModelLoadError(f"{path}: {name}() raised {describe(e)}{_where(e, path)}") from e


def _unpack(result: Any, factory: str, path: Path) -> tuple[Any, Any, Any]:
    if not (isinstance(result, tuple) and len(result) in (2, 3)):
        raise ModelLoadError(
            f"{path}: {factory}() returned {type(result).__name__}, expected (model, example_inputs) "
            "or (model, example_inputs, example_kwargs)"
        )
    return result if len(result) == 3 else (*result, None)


def _checked(path: Path, model: Any, example_inputs: Any, kwargs: Any) -> tuple[Any, Any, dict[str, Any] | None]:
    import torch

    if not isinstance(model, torch.nn.Module):
        raise ModelLoadError(
            f"{path}: `model` is a {type(model).__name__}, not a torch.nn.Module",
            hint="instantiate the module: model = MyNet(), not model = MyNet",
        )
    if kwargs is not None and not isinstance(kwargs, dict):
        raise ModelLoadError(f"{path}: `example_kwargs` is a {type(kwargs).__name__}, not a dict")
    return model, example_inputs, kwargs
