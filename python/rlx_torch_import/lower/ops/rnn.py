"""Recurrent layers: aten.lstm / aten.gru (multi-layer, bidirectional, batch_first) on RLX Lstm / Gru.

Each layer is one RLX node (num_layers = 1), so every layer's output sequence exists and
h_n is read from it: the last step of the forward direction, the first step of the reverse.
RLX writes the final cell state only in place into its c0 input, so LSTM's c_n is recomputed
exactly from the output sequence: the gates of every step are one batched matmul over
(x_t, h_{t-1}), then c_t = f_t * c_{t-1} + i_t * g_t is unrolled (elementwise only).
"""

from __future__ import annotations

from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers

_GATES = {"aten.lstm.input": 4, "aten.gru.input": 3}


def _check_rnn(call: Call) -> str | None:
    layers, dirs = int(call["num_layers"]), 2 if call["bidirectional"] else 1
    per = 4 if call["has_biases"] else 2
    if len(call["params"]) != layers * dirs * per:
        n = len(call["params"])
        return f"{n} weight tensors for {layers} layer(s) x {dirs} direction(s): proj_size is not supported"
    if call["train"] and call["dropout"]:
        return "training-mode dropout between layers is not supported"
    x = call["input"]
    if getattr(x, "rank", 3) != 3:
        return "unbatched (2-D) input is not supported"
    if getattr(x, "dtype", "float32") != "float32":
        return f"dtype {x.dtype} is not supported (RLX recurrent kernels are float32)"
    return None


def _is_zero(b: Builder, v: Value) -> bool:
    """Whether `v` is a constant zero (an all-zero Constant, possibly reshaped/expanded)."""
    nodes = {n.id: n for n in b.program.nodes}
    node = nodes.get(v.id)
    while node is not None and isinstance(node.op, dict) and ("Expand" in node.op or "Reshape" in node.op):
        node = nodes.get(node.inputs[0])
    if node is None or not isinstance(node.op, dict) or "Constant" not in node.op:
        return False
    return not any(node.op["Constant"]["data"])


def _cat0(b: Builder, parts: list[Value]) -> Value:
    """Concatenate along axis 0."""
    if len(parts) == 1:
        return parts[0]
    dims = (sum(p.dims[0] for p in parts), *parts[0].dims[1:])
    return b.emit({"Concat": {"axis": 0}}, parts, dims, parts[0].dtype)


def _layer_weights(b: Builder, call: Call, layer: int, dirs: int, gates: int) -> list[Value]:
    """Packed [w_ih, w_hh, b_ih, b_hh] of one layer (directions concatenated on the gate rows)."""
    per = 4 if call["has_biases"] else 2
    blocks = [call["params"][(layer * dirs + d) * per : (layer * dirs + d + 1) * per] for d in range(dirs)]
    w_ih = _cat0(b, [blk[0] for blk in blocks])
    w_hh = _cat0(b, [blk[1] for blk in blocks])
    hidden = w_hh.dims[1]
    if per == 4:
        b_ih, b_hh = _cat0(b, [blk[2] for blk in blocks]), _cat0(b, [blk[3] for blk in blocks])
    else:
        b_ih = b_hh = b.expand(b.const(0.0, w_ih.dtype), (dirs * gates * hidden,))
    return [w_ih, w_hh, b_ih, b_hh]


def _private(b: Builder, h: Value, start: int, length: int, zero_first: bool = False) -> Value:
    """Rows [start, start+length) of h in a buffer of their own (a Concat with a zero row, then Narrow).

    RLX writes the final state into a carried state input in place, and folds `h + 0` away, so
    only a freshly concatenated buffer keeps the caller's tensor (and our other readers) intact.
    The kernel's copy and our own reads use different concat orders so RLX cannot merge them.
    """
    zero = b.expand(b.scalar_like(0.0, h), (1, *h.dims[1:]))
    parts = [zero, h] if zero_first else [h, zero]
    pad = b.emit({"Concat": {"axis": 0}}, parts, (h.dims[0] + 1, *h.dims[1:]), h.dtype)
    start += int(zero_first)
    return b.emit({"Narrow": {"axis": 0, "start": start, "len": length}}, [pad], (length, *h.dims[1:]), h.dtype)


def _cat(b: Builder, parts: list[Value], axis: int) -> Value:
    """Concatenate along `axis`."""
    if len(parts) == 1:
        return parts[0]
    dims = list(parts[0].dims)
    dims[axis] = sum(p.dims[axis] for p in parts)
    return b.emit({"Concat": {"axis": axis}}, parts, dims, parts[0].dtype)


def _direction(b: Builder, w: list[Value], d: int, hidden: int, gates: int) -> list[Value]:
    """Direction d's [w_ih, w_hh, bias] rows out of a layer's packed weights."""
    rows = gates * hidden
    return [b.narrow(v, 0, d * rows, rows) for v in w]


def _cell_state(b: Builder, x: Value, y: Value, w: list[Value], h0: Value | None, c0: Value | None, d: int) -> Value:
    """One direction's c_n: z = x_t W_ih^T + h_{t-1} W_hh^T + b for all t at once; c_t = f_t c_{t-1} + i_t g_t."""
    batch, seq, hidden = y.dims
    w_ih, w_hh, bias = w
    h_init = h0 if h0 is not None else b.expand(b.scalar_like(0.0, y), (batch, 1, hidden))
    # h_{t-1} for every t: the forward direction reads the previous step, the reverse the next one.
    if d == 0:
        h_prev = _cat(b, [h_init, b.narrow(y, 1, 0, seq - 1)] if seq > 1 else [h_init], 1)
    else:
        h_prev = _cat(b, [b.narrow(y, 1, 1, seq - 1), h_init] if seq > 1 else [h_init], 1)
    z = b.binary("Add", _rows_times(b, x, w_ih), _rows_times(b, h_prev, w_hh))
    z = b.binary("Add", z, bias)
    i = b.unary("Sigmoid", b.narrow(z, 2, 0, hidden))
    f = b.unary("Sigmoid", b.narrow(z, 2, hidden, hidden))
    ig = b.binary("Mul", i, b.unary("Tanh", b.narrow(z, 2, 2 * hidden, hidden)))
    order = list(range(seq)) if d == 0 else list(range(seq - 1, -1, -1))
    c = b.narrow(ig, 1, order[0], 1)
    if c0 is not None:
        c = b.binary("Add", b.binary("Mul", b.narrow(f, 1, order[0], 1), c0), c)
    for t in order[1:]:
        c = b.binary("Add", b.binary("Mul", b.narrow(f, 1, t, 1), c), b.narrow(ig, 1, t, 1))
    return b.reshape(c, (1, batch, hidden))


def _rows_times(b: Builder, x: Value, w: Value) -> Value:
    """x @ w^T for x [batch, seq, k], w [n, k], as one 2-D matmul."""
    batch, seq, k = x.dims
    y = b.matmul(b.reshape(x, (batch * seq, k)), b.transpose(w, [1, 0]))
    return b.reshape(y, (batch, seq, w.dims[0]))


def _state(b: Builder, h: Value, index: int) -> Value:
    """Initial state row `index` of [L*D, batch, hidden] as [batch, 1, hidden]."""
    return b.reshape(_private(b, h, index, 1, zero_first=True), (h.dims[1], 1, h.dims[2]))


def _rnn(b: Builder, call: Call) -> list[Value | None]:
    """Stacked recurrent layers: last layer's output, h_n (and LSTM c_n) stacked as [L*D, batch, hidden]."""
    gates = _GATES[call.target]
    layers, dirs = int(call["num_layers"]), 2 if call["bidirectional"] else 1
    batch_first = bool(call["batch_first"])
    x = call.tensor("input")
    x = x if batch_first else b.transpose(x, [1, 0, 2])  # RLX wants [batch, seq, feature]
    hx = call["hx"] if isinstance(call["hx"], list) else [call["hx"]]
    zero = [_is_zero(b, h) for h in hx]
    carry = not all(zero)
    batch, seq = x.dims[0], x.dims[1]
    h_last: list[Value] = []
    c_last: list[Value] = []
    for layer in range(layers):
        w_ih, w_hh, b_ih, b_hh = _layer_weights(b, call, layer, dirs, gates)
        hidden = w_hh.dims[1]
        bias = b.binary("Add", b_ih, b_hh)
        inputs = [x, w_ih, w_hh, bias] if gates == 4 else [x, w_ih, w_hh, b_ih, b_hh]
        if carry:
            inputs += [_private(b, h, layer * dirs, dirs) for h in hx]
        variant = "Lstm" if gates == 4 else "Gru"
        op = {variant: {"hidden_size": hidden, "num_layers": 1, "bidirectional": dirs == 2, "carry": carry}}
        y = b.emit(op, inputs, (batch, seq, dirs * hidden), x.dtype)
        for d in range(dirs):
            y_d = b.narrow(y, 2, d * hidden, hidden)
            h_last.append(b.reshape(b.narrow(y_d, 1, seq - 1 if d == 0 else 0, 1), (1, batch, hidden)))
            if gates == 4:
                h0, c0 = (None if z else _state(b, h, layer * dirs + d) for h, z in zip(hx, zero, strict=True))
                w = _direction(b, [w_ih, w_hh, bias], d, hidden, gates)
                c_last.append(_cell_state(b, x, y_d, w, h0, c0, d))
        x = y
    out = x if batch_first else b.transpose(x, [1, 0, 2])
    results: list[Value | None] = [out, _cat0(b, h_last)]
    return [*results, _cat0(b, c_last)] if gates == 4 else results


@lowers("aten.lstm.input", check=_check_rnn)
def lstm(b: Builder, call: Call) -> list[Value | None]:
    """LSTM (gates i, f, g, o): c = f*c + i*g, h = o*tanh(c); returns output, h_n, c_n."""
    return _rnn(b, call)


@lowers("aten.gru.input", check=_check_rnn)
def gru(b: Builder, call: Call) -> list[Value | None]:
    """GRU (gates r, z, n): n = tanh(W_in x + b_in + r*(W_hn h + b_hn)), h = (1-z)*n + z*h; output, h_n."""
    return _rnn(b, call)
