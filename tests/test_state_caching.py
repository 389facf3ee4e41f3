"""Forwards that keep state on the module (caches keyed on a shape, counters, lazily made buffers and
submodules, ultralytics-style detection heads): conversion runs each as one call from the state as
given, torch.export's fake tensors never reach an eager run, and the module is left as it was."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torch.export import Dim

import rlx_torch_import as rti
from rlx_torch_import import safetensors_io
from rlx_torch_import.errors import ExitCode, ExportError, InputError
from rlx_torch_import.frontend.torch.module_attrs import storage_ptr
from rlx_torch_import.frontend.torch.state import ModelState


def make_anchors(feats: list[torch.Tensor], strides: torch.Tensor, offset: float = 0.5) -> tuple[torch.Tensor, ...]:
    """ultralytics' `make_anchors`: one (x, y) cell centre and one stride per feature-map cell."""
    points, stride_rows = [], []
    for i, feat in enumerate(feats):
        h, w = feat.shape[2:]
        sx = torch.arange(w).type_as(feat) + offset
        sy = torch.arange(h).type_as(feat) + offset
        sy, sx = torch.meshgrid(sy, sx, indexing="ij")
        points.append(torch.stack((sx, sy), -1).view(-1, 2))
        stride_rows.append(feat.new_full((h * w, 1), strides[i], dtype=feat.dtype))  # a 0-d tensor fill
    return torch.cat(points), torch.cat(stride_rows)


class Detect(nn.Module):
    """An ultralytics-style detection head: anchors and strides cached on the module (class attributes
    shadowed by instance ones) the first time forward sees a shape."""

    shape: Any = None
    anchors = torch.empty(0)
    strides = torch.empty(0)

    def __init__(self, nc: int = 3, ch: tuple[int, ...] = (8, 16)) -> None:
        super().__init__()
        self.nc, self.no = nc, nc + 4
        self.stride = torch.tensor([8.0, 16.0])
        self.cv = nn.ModuleList(nn.Conv2d(c, self.no, 1) for c in ch)

    def forward(self, xs: list[torch.Tensor]) -> torch.Tensor:
        xs = [conv(x) for conv, x in zip(self.cv, xs, strict=True)]
        shape = xs[0].shape
        x_cat = torch.cat([x.view(shape[0], self.no, -1) for x in xs], 2)
        if self.shape != shape:
            self.anchors, self.strides = (t.transpose(0, 1) for t in make_anchors(xs, self.stride))
            self.shape = shape
        box, cls = x_cat.split((4, self.nc), 1)
        lt, rb = box[:, :2], box[:, 2:]
        xy = (self.anchors.unsqueeze(0) + (rb - lt) / 2) * self.strides
        return torch.cat((xy, (rb + lt) * self.strides, cls.sigmoid()), 1)


class TinyYolo(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b1 = nn.Conv2d(3, 8, 3, stride=8, padding=1)
        self.b2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.head = Detect()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.b1(x)
        return self.head([a, self.b2(a)])


class FirstCall(nn.Module):
    """Caches a tensor on the first call."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.cache: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.cache is None:
            self.cache = torch.arange(x.shape[-1], dtype=x.dtype) * 0.5
        return self.lin(x) + self.cache


class ShapeKeyed(nn.Module):
    """Recomputes its table when the length changes (`getattr`: the attribute does not exist yet)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        if getattr(self, "seen", None) != n:
            self.table = torch.sin(torch.arange(n, dtype=x.dtype) * 0.3)[None, :, None]
            self.seen = n
        return x * self.table


class Counter(nn.Module):
    """A Python counter, a list and a dict of tensors, written by every call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.history: list[int] = []
        self.stats: dict[str, torch.Tensor] = {"first": torch.zeros(())}
        self.sums: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.history.append(x.shape[0])
        self.stats["last"] = x.sum()
        self.sums.append(x.sum(0))
        return x * 2 + self.calls + len(self.sums)


class _Cache:
    """A plain object holding a cache (not a module, not a container)."""

    def __init__(self) -> None:
        self.table: torch.Tensor | None = None


class ObjectCache(nn.Module):
    """Keeps its cache in a plain object: torch.export's own attribute restore does not reach inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.cache = _Cache()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.cache.table is None or self.cache.table.shape[0] != x.shape[-1]:
            self.cache.table = torch.cos(torch.arange(x.shape[-1], dtype=x.dtype))
        return x * self.cache.table


class LazyBuffer(nn.Module):
    """Registers a buffer on the first call, beside a root buffer it replaces and a submodule's buffer
    (non-strict torch.export used to write the new buffer's value into `lin.sb`)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("old", torch.ones(5))
        self.lin = nn.Linear(5, 5)
        self.lin.register_buffer("sb", torch.full((5,), 0.25))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not hasattr(self, "pos"):
            self.register_buffer("pos", torch.linspace(0, 1, x.shape[-1]), persistent=False)
        self.old = self.old * 2
        return self.lin(x) + self.pos + self.old + self.lin.sb


class Inner(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if getattr(self, "scale", None) is None or self.scale.shape[0] != x.shape[-1]:
            self.scale = torch.arange(x.shape[-1], dtype=x.dtype) + 2
        return x * self.scale


class Outer(nn.Module):
    """A cache on a submodule, and an attribute the parent sets on it."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = Inner()
        self.inner.tag = "t"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.inner.last = x.shape
        return self.inner(x) + 1


class RunningAttr(nn.Module):
    """A plain tensor attribute (not a buffer) written in place."""

    def __init__(self) -> None:
        super().__init__()
        self.total = torch.full((4,), 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.total += x.sum(0)
        return x - self.total


class LazyLinear(nn.Module):
    """Makes its Linear on the first call: the weights are drawn then."""

    def __init__(self) -> None:
        super().__init__()
        self.proj: nn.Module | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.proj is None:
            self.proj = nn.Linear(x.shape[-1], 3)
        return self.proj(x)


# ---- the module's state, compared before and after ----


def _values(value: Any) -> Any:
    """`value` as something compared by `_same`: tensors cloned, containers followed."""
    if isinstance(value, torch.Tensor):
        return ("tensor", value, value.detach().clone())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, value, [_values(v) for v in value])
    if isinstance(value, dict):
        return ("dict", value, {k: _values(v) for k, v in value.items()})
    return ("same", value, None)


def _same(a: Any, b: Any) -> bool:
    kind, obj, inner = a
    kind_b, obj_b, inner_b = b
    if kind != kind_b or obj is not obj_b:
        return False
    if kind == "tensor":
        return storage_ptr(obj) is not None and torch.equal(inner, inner_b)
    if kind == "dict":
        return inner.keys() == inner_b.keys() and all(_same(inner[k], inner_b[k]) for k in inner)
    if kind in ("list", "tuple"):
        return len(inner) == len(inner_b) and all(_same(x, y) for x, y in zip(inner, inner_b, strict=True))
    return True


def _state(model: nn.Module) -> dict[str, Any]:
    """Every module's attributes (hooks aside), parameters, buffers and submodules, with their values."""
    found: dict[str, Any] = {}
    for path, module in model.named_modules():
        for key, value in vars(module).items():
            if key in ("_parameters", "_buffers", "_modules"):
                found[f"{path}:{key}"] = _values(value)
            elif key != "training" and not key.endswith(("hooks", "hook", "_hooks_always_called")):
                found[f"{path}.{key}"] = _values(value)
    return found


def _assert_kept(model: nn.Module, before: dict[str, Any]) -> None:
    now = _state(model)
    assert now.keys() == before.keys(), f"added {now.keys() - before.keys()}, removed {before.keys() - now.keys()}"
    changed = [k for k in now if not _same(now[k], before[k])]
    assert not changed, f"changed: {changed}"


def _reference(out) -> dict[str, np.ndarray]:
    return {k: v.to_numpy() for k, v in safetensors_io.read(out / "reference.safetensors").items()}


def _convert(model: nn.Module, inputs: tuple[torch.Tensor, ...], out, **kw: Any) -> rti.ParityReport:
    before = _state(model)
    report = rti.from_torch(model, inputs, out, **kw)
    assert report.ok, report.summary()
    _assert_kept(model, before)
    return report


# ---- the tests ----


def test_yolo_like_detect_head_verifies_and_is_left_cold(tmp_path) -> None:
    """The issue's repro: anchors cached on first call (non-strict export used to leave FakeTensors in
    `head.anchors`, and the reference run then crashed in the alias check)."""
    torch.manual_seed(0)
    m = TinyYolo().eval()
    x = torch.randn(1, 3, 64, 64)
    _convert(m, (x,), tmp_path / "o")
    assert "anchors" not in vars(m.head) and m.head.shape is None  # the class attributes show again
    with torch.no_grad():  # the reference is what a plain eager call of the model gives
        np.testing.assert_array_equal(_reference(tmp_path / "o")["output.output"], m(x).numpy())


def test_yolo_like_dynamic_width_recomputes_anchors_per_size(tmp_path) -> None:
    torch.manual_seed(0)
    m = TinyYolo().eval()
    k = Dim("k", min=2, max=6)
    report = _convert(m, (torch.randn(1, 3, 64, 64),), tmp_path / "o", dynamic_shapes={"x": {3: 16 * k}})
    assert report.sweep and all(row.ok for row in report.sweep), report.summary()


def test_warm_model_converts_with_its_cache(tmp_path) -> None:
    """A model run once before: export reads the real cached anchors; they stay the model's."""
    torch.manual_seed(0)
    m = TinyYolo().eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        m(x)
    anchors = m.head.anchors
    _convert(m, (x,), tmp_path / "o")
    assert m.head.anchors is anchors and type(anchors) is torch.Tensor


def test_warm_shape_cache_with_dynamic_dims_is_named_not_blamed_on_us(tmp_path) -> None:
    """A cache filled by an earlier call is traced with its values (torch adds no guard), so the program is
    wrong at other widths: the first sweep point whose eager shape differs says so, as an ExportError."""
    torch.manual_seed(0)
    m = TinyYolo().eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        m(x)
    before = _state(m)
    with pytest.raises(ExportError) as err:
        rti.from_torch(m, (x,), tmp_path / "o", dynamic_shapes={"x": {3: Dim.AUTO}})
    assert "sweep point" in err.value.message and "does not follow the model" in err.value.message
    assert "cached" in (err.value.hint or "")
    _assert_kept(m, before)


def test_first_call_cache(tmp_path) -> None:
    torch.manual_seed(0)
    m = FirstCall().eval()
    _convert(m, (torch.randn(2, 4),), tmp_path / "o")
    assert m.cache is None


def test_shape_keyed_cache_recomputed_at_each_sweep_point(tmp_path) -> None:
    m = ShapeKeyed()
    out = tmp_path / "o"
    report = _convert(m, (torch.randn(2, 5, 3),), out, dynamic_shapes={"x": {1: Dim("n", min=2, max=12)}})
    assert report.sweep and all(row.ok for row in report.sweep), report.summary()
    assert not hasattr(m, "table")
    ref = _reference(out)
    points = {key.split(".")[1] for key in ref if key.startswith("sweep.")}
    assert len(points) >= 3
    for i in points:  # each at its own length, as eager PyTorch computes it
        xi = ref[f"sweep.{i}.input.x"]
        table = np.sin(np.arange(xi.shape[1], dtype=np.float32) * np.float32(0.3))[None, :, None]
        np.testing.assert_allclose(ref[f"sweep.{i}.output.output"], xi * table, rtol=1e-6)


@pytest.mark.parametrize("strict", [False, True])
def test_counter_list_and_dict(strict: bool, tmp_path) -> None:
    m = Counter()
    out = tmp_path / "o"
    x = torch.randn(3, 2)
    _convert(m, (x,), out, strict=strict, verify_inputs=[(torch.ones(3, 2),)])
    assert m.calls == 0 and m.history == [] and list(m.stats) == ["first"] and m.sums == []
    ref = _reference(out)  # every run is the first call: calls == 1, one sum kept
    np.testing.assert_allclose(ref["output.output"], x.numpy() * 2 + 2, rtol=1e-6)
    np.testing.assert_allclose(ref["set.0.output.output"], np.full((3, 2), 4.0, dtype=np.float32))


def test_cache_in_a_plain_object(tmp_path) -> None:
    m = ObjectCache()
    cache = m.cache
    _convert(m, (torch.randn(2, 6),), tmp_path / "o", dynamic_shapes={"x": {1: Dim("n", min=2, max=9)}})
    assert m.cache is cache and cache.table is None


@pytest.mark.parametrize("strict", [False, True])
def test_lazily_registered_buffer(strict: bool, tmp_path) -> None:
    torch.manual_seed(0)
    m = LazyBuffer()
    out = tmp_path / "o"
    x = torch.randn(2, 5)
    _convert(m, (x,), out, strict=strict)
    assert not hasattr(m, "pos") and not m._non_persistent_buffers_set
    with torch.no_grad():
        np.testing.assert_array_equal(_reference(out)["output.output"], m(x).numpy())


def test_cache_on_a_submodule(tmp_path) -> None:
    m = Outer()
    _convert(m, (torch.randn(2, 6),), tmp_path / "o", dynamic_shapes={"x": {1: Dim("n", min=2, max=9)}})
    assert not hasattr(m.inner, "scale") and not hasattr(m.inner, "last") and m.inner.tag == "t"


class CapturingHooks(nn.Module):
    """transformers' output capturing, in small: the first call installs a forward hook on a submodule
    that records its output, and flags the model so later calls do not install it again."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not getattr(self, "_hooks_installed", False):
            self.inner.register_forward_hook(lambda m, a, out: self.__dict__.setdefault("seen", []).append(out))
            self._hooks_installed = True
        self.__dict__["seen"] = []
        y = self.inner(x)
        return self.__dict__["seen"][0] * 2 + y


def test_hooks_a_forward_installs_are_given_back_with_its_flag(tmp_path) -> None:
    """The hook and the flag a forward sets on its first call are both given back: export's hook (on
    fake tensors) must not stay installed while the flag is removed, or the next call installs none."""
    m = CapturingHooks()
    _convert(m, (torch.randn(2, 4),), tmp_path / "o")
    assert not m.inner._forward_hooks and not hasattr(m, "_hooks_installed")


def test_plain_tensor_attribute_written_in_place_is_refused_clearly(tmp_path) -> None:
    """torch.export refuses a plain (not buffer) tensor attribute written in place; the hint says how to fix it and
    the module keeps its values."""
    m = RunningAttr()
    before = _state(m)
    with pytest.raises(ExportError) as err:
        rti.from_torch(m, (torch.randn(3, 4),), tmp_path / "o")
    assert "total" in err.value.message and "register_buffer" in (err.value.hint or "")
    _assert_kept(m, before)
    assert torch.equal(m.total, torch.full((4,), 0.5))


def test_lazily_made_parameters_are_refused_by_name(tmp_path) -> None:
    m = LazyLinear()
    before = _state(m)
    with pytest.raises(ExportError) as err:
        rti.from_torch(m, (torch.randn(2, 4),), tmp_path / "o")
    assert "proj.weight" in err.value.message and "lazy initialization" in err.value.message
    assert err.value.exit_code == ExitCode.EXPORT_FAILED
    assert "raised" not in err.value.message  # not blamed on the model's eager run
    _assert_kept(m, before)


def test_fake_tensors_left_by_an_earlier_export_are_named(tmp_path) -> None:
    """torch.export run by the user leaves FakeTensors in `head.anchors`: named, not a data-pointer crash."""
    m = TinyYolo().eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        torch.export.export(m, (x,))
    assert storage_ptr(m.head.anchors) is None  # torch's own export left a fake tensor
    with pytest.raises(ExportError) as err:
        rti.from_torch(m, (x,), tmp_path / "o")
    assert "head.anchors" in err.value.message and "as passed in" in err.value.message


def test_alias_check_skips_values_without_storage() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    m = RunningAttr()
    state = ModelState(m)
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.ones(4))
    assert not state.aliases(fake)
    assert not state.aliases(torch.empty(2, device="meta"))
    assert state.aliases(m.total[1:])  # a view of an attribute tensor the state gives back


def test_failed_export_leaves_no_fake_state_and_reports_the_export(tmp_path) -> None:
    """A forward that caches, then branches on a tensor's value: torch.export fails after the cache was set to a
    fake tensor; the error is torch.export's (not an eager run's), and the module keeps its state."""

    class CachesThenBranches(ShapeKeyed):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = super().forward(x)
            return y * 2 if y.sum() > 0 else y

    m = CachesThenBranches()
    before = _state(m)
    with pytest.raises(ExportError) as err:
        rti.from_torch(m, (torch.randn(2, 5, 3),), tmp_path / "o")
    assert err.value.message.startswith("torch.export failed")
    _assert_kept(m, before)
    assert not hasattr(m, "table")


def test_uninitialized_lazy_module_is_refused_before_anything_runs(tmp_path) -> None:
    """torch's own lazy modules make their parameters (and change their class) on the first call: refused by name
    before export, and the module is left lazy."""
    m = nn.Sequential(nn.LazyLinear(3))
    with pytest.raises(InputError) as err:
        rti.from_torch(m, (torch.randn(2, 4),), tmp_path / "o")
    assert "0.weight" in err.value.message and err.value.exit_code == ExitCode.BAD_INPUT
    assert type(m[0]) is nn.LazyLinear
