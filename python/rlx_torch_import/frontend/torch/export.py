"""Run torch.export and apply one of three decomposition levels.

- `aten`: the graph as torch.export gives it (no `run_decompositions`).
- `high` (default): Core ATen, except the high-level ops RLX has fused kernels
  for, which are kept whole (see `_preserved_high_level`; also linspace/logspace,
  whose torch decomposition computes other integers than its kernel).
- `core`: full Core ATen.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from ...errors import ExportError, InputError
from ...timeout import exit_error

DECOMPOSITION_LEVELS = ("aten", "high", "core")


def _preserved_high_level() -> list[Any]:
    """High-level ATen ops that map onto fused RLX ops (or whose torch decomposition computes other
    values than torch's kernel); kept out of the decomposition table."""
    aten = torch.ops.aten
    names = [
        "linear.default",
        "layer_norm.default",
        "native_layer_norm.default",
        "group_norm.default",
        "native_group_norm.default",
        "batch_norm.default",
        "rms_norm.default",
        "scaled_dot_product_attention.default",
        "gelu.default",
        "silu.default",
        "softmax.int",
        "log_softmax.int",
        "conv1d.default",
        "conv2d.default",
        "conv_transpose2d.input",
        "embedding.default",
        "max_pool2d.default",
        "adaptive_avg_pool2d.default",
        "hardswish.default",
        "hardsigmoid.default",
        "mish.default",
        # torch's decompositions of these compute other values than its kernels (integer dtypes: the
        # kernel truncates start and end first), so they are lowered whole from torch's own values
        "linspace.default",
        "logspace.default",
    ]
    ops = []
    for name in names:
        packet, _, overload = name.partition(".")
        op = getattr(getattr(aten, packet, None), overload, None)
        if op is not None:
            ops.append(op)
    return ops


def decomposition_table(level: str) -> dict[Any, Any] | None:
    """The table passed to `run_decompositions`, or None for `aten` (no decomposition)."""
    if level == "aten":
        return None
    table = torch.export.default_decompositions()
    if level == "high":
        for op in _preserved_high_level():
            table.pop(op, None)
    return table


def _user_frame(exc: BaseException) -> str:
    """` at file.py:12 (code)` for the innermost frame of the user's own code, if any."""
    import traceback
    from pathlib import Path

    torch_dir = str(Path(torch.__file__).parent)
    ours = str(Path(__file__).parents[1])
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith((torch_dir, ours))
        and "site-packages" not in f.filename
        and not f.filename.startswith("<")
    ]
    if not frames:
        return ""
    f = frames[-1]
    return f" at {Path(f.filename).name}:{f.lineno} ({(f.line or '').strip()})"


@contextmanager
def _torch_logs_quiet() -> Iterator[None]:
    """torch logs its own warnings while export fails; our ExportError already says it, once."""
    loggers = [logging.getLogger("torch")] + [
        logging.getLogger(name) for name in list(logging.root.manager.loggerDict) if name.startswith("torch")
    ]
    saved = [(lg, lg.level) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in saved:
            lg.setLevel(level)


class _Collect(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.INFO)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(record.getMessage())


@contextmanager
def _shape_log(sink: list[str] | None) -> Iterator[None]:
    """Collect torch's symbolic-shape log (symbols created, guards added) into `sink`, printing nothing."""
    if sink is None:
        yield
        return
    logger = logging.getLogger("torch.fx.experimental.symbolic_shapes")
    saved = (logger.level, logger.propagate, list(logger.handlers))
    logger.handlers = [_Collect(sink)]  # torch's own handler would print the INFO lines
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
        logger.handlers = saved[2]


def _library_pytrees() -> None:
    """Let torch.export flatten the containers a model library returns: Hugging Face's
    `DynamicCache` (the `past_key_values` of a causal LM), through transformers' own
    `register_dynamic_cache_export_support`. Only when transformers is already imported."""
    if "transformers" not in sys.modules:
        return
    try:
        from transformers.integrations.executorch import register_dynamic_cache_export_support
    except ImportError:  # an older transformers: its caches stay unknown to torch's pytree
        return
    register_dynamic_cache_export_support()


def export_program(
    model: torch.nn.Module,
    example_inputs: Sequence[Any],
    *,
    kwargs: dict[str, Any] | None = None,
    decomposition: str = "high",
    dynamic_shapes: Any = None,
    strict: bool = False,
    shape_log: list[str] | None = None,
) -> torch.export.ExportedProgram:
    """torch.export under no_grad in eval mode, then decompose to `decomposition`. With `shape_log`,
    torch's symbolic-shape log lines are appended to it (why a dynamic dim was specialized).
    Raises InputError for a bad level, a model that is not a module or names that are not valid
    Unicode; ExportError when torch.export or the decomposition fails; ModelLoadError when the
    model calls sys.exit()."""
    if decomposition not in DECOMPOSITION_LEVELS:
        raise InputError(f"decomposition must be one of {', '.join(DECOMPOSITION_LEVELS)}, got {decomposition!r}")
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    bad = [repr(n) for n in _state_names(model) if not _is_unicode(n)]
    if bad:  # e.g. bytes decoded with surrogateescape: no UTF-8 or JSON file can hold them
        raise InputError(
            f"module, parameter or buffer name(s) {', '.join(bad[:5])} are not valid Unicode (lone surrogates)",
            hint="rename them with text that is valid UTF-8",
        )
    for sub in model.modules():  # eval() without calling it: an exported GraphModule (PT2E) forbids eval()
        sub.training = False
    _library_pytrees()
    root_buffers = {n for n, b in model._buffers.items() if b is not None}
    chatter = io.StringIO()  # torch prints graph dumps while failing; our error says it once
    try:
        with (
            torch.no_grad(),
            _torch_logs_quiet(),
            contextlib.redirect_stdout(chatter),
            contextlib.redirect_stderr(chatter),
            _shape_log(shape_log),
        ):
            ep = torch.export.export(
                model, tuple(example_inputs), kwargs=kwargs or None, dynamic_shapes=dynamic_shapes, strict=strict
            )
        sys.stderr.write(chatter.getvalue())
        _drop_misplaced_buffer_copies(ep, model, root_buffers)
    except SystemExit as e:  # the model's forward called sys.exit(): bad input, not an export failure
        raise exit_error(e, "torch.export") from None
    except Exception as e:  # torch raises many types here; all become one ExportError
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        hint = "torch.export could not trace the model."
        text = str(e)
        lines = [line.rstrip() for line in text.splitlines()[1:] if line.strip()]
        reasons = [line for line in lines if not line.startswith(("The error above", "For more information"))]
        if dynamic_shapes is not None and ("Constraints violated" in text or "specialized" in text.lower()):
            # torch names each dim and the guard its range breaks; that is the whole message
            first = "\n".join([first, *reasons[:12]])
            if "specialized it to be a constant" in text:
                hint += (
                    " The model ties a dim you marked dynamic to a static size: usually another input shares"
                    " it (attention_mask, token_type_ids next to input_ids); mark that axis of every such input"
                    " with the same Dim, or make the dim static. Or forward compares it with a size an earlier"
                    " call cached on the module (`if self.shape != x.shape`, as YOLO heads do): convert a model"
                    " whose cache is empty (not yet called)."
                )
            else:
                hint += (
                    " A dynamic dim's range includes sizes the model cannot take (torch's guards above);"
                    " narrow the Dim's min/max to the sizes the model supports, or make the dim static."
                )
        elif "data-dependent" in text.lower() or "guard" in text.lower() or "GuardOnDataDependent" in type(e).__name__:
            hint += (
                " The forward needs a Python value of something read from a tensor: an if/while on it,"
                " or int()/bool()/max() of a `.item()` result. Rewrite it with torch.where / torch.cond,"
                " keep the value a tensor (arithmetic on `.item()` is fine), or make it a constant."
            )
        else:
            hint += " Check that forward() runs on the example inputs and uses only torch operations."
        raise ExportError(f"torch.export failed{_user_frame(e)}: {type(e).__name__}: {first}", hint=hint) from e
    table = decomposition_table(decomposition)
    if table is not None:
        try:
            ep = ep.run_decompositions(table)
        except Exception as e:
            hint = "try another --decomposition level"
            odd = _unprintable_names(model) if isinstance(e, SyntaxError) else []
            if "is mutated in the forward method" in str(e):  # torch: a plain tensor attribute written in place
                hint = (
                    "the forward writes a tensor attribute of the module in place (`self.total += x`) that is not a "
                    "buffer, which torch.export cannot trace as state; register it with register_buffer "
                    "(persistent=False keeps it out of state_dict)"
                )
            elif odd:  # torch prints these names into Python source it then compiles
                hint = (
                    f"torch cannot decompose a model whose module, parameter or buffer names hold quotes, "
                    f"line breaks or NUL: {', '.join(odd[:5])}{', ...' if len(odd) > 5 else ''}; "
                    "rename them, or use --decomposition aten"
                )
            elif kwargs and dynamic_shapes is not None and "_guards_fn" in str(e):
                hint = (
                    "torch cannot re-run the shape guards of a forward(..., **kwargs) given tensors through its "
                    "**kwargs with dynamic shapes (a torch defect in run_decompositions); convert with "
                    "decomposition='aten' (CLI: --decomposition aten), or give forward named parameters for them"
                )
            raise ExportError(
                f"run_decompositions({decomposition!r}) failed: {type(e).__name__}: {e}", hint=hint
            ) from e
    return ep


def _drop_misplaced_buffer_copies(ep: torch.export.ExportedProgram, model: torch.nn.Module, before: set[str]) -> None:
    """Undo torch.export's misplaced writes of a buffer the forward registers on the root module while traced.

    Non-strict export writes each root buffer the forward assigns back with a `copy_(input, value)` it appends
    to the graph (the node shares its value's `meta`), finding the input by the buffer's index among the root's
    buffers as they are after the trace. A buffer registered during the trace (`register_buffer` on the first
    call) had no input, and its index lands on another: a submodule's buffer or a user input, which the graph
    would then overwrite (a torch 2.15 defect). Those copies are dropped; copies into root buffers that existed
    before export are right, and stay."""
    from torch.export.graph_signature import InputKind

    if not {n for n, b in model._buffers.items() if b is not None} - before:
        return
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs if hasattr(s.arg, "name")}
    graph = ep.graph_module.graph
    dropped = False
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not torch.ops.aten.copy_.default or node.users:
            continue
        dst, src = (*node.args, None, None)[:2]
        if not isinstance(dst, torch.fx.Node) or not isinstance(src, torch.fx.Node) or node.meta is not src.meta:
            continue  # a copy_ the forward made
        spec = specs.get(dst.name)
        if spec is None or spec.kind != InputKind.BUFFER or str(spec.target) not in before:
            graph.erase_node(node)
            dropped = True
    if dropped:
        ep.graph_module.recompile()


def _state_names(model: torch.nn.Module) -> list[str]:
    """The model's module, parameter and buffer names, each once, in order."""
    named = [n for n, _ in model.named_modules()] + [n for n, _ in model.named_parameters()]
    named += [n for n, _ in model.named_buffers()]
    return list(dict.fromkeys(named))


def _is_unicode(text: str) -> bool:
    """Whether `text` has no lone surrogate (so it can be written as UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unprintable_names(model: torch.nn.Module) -> list[str]:
    """The model's module, parameter and buffer names (repr'd) with characters torch's generated
    Python code cannot hold."""
    return [repr(n) for n in _state_names(model) if any(c in n for c in "'\"\n\r\0")]
