"""Type stubs for the Rust core (src/python.rs)."""

from typing_extensions import Buffer

def program_to_hir_json(program_json: str) -> str:
    """Lowered-program JSON -> rlx-ir HIR JSON; raises RuntimeError naming the bad node."""

def rlx_version() -> str:
    """Version of the RLX crates the core was built against."""

def set_rlx_env(key: str, value: str | None = None) -> None:
    """Set or clear an in-process `RLX_*` override (rlx_ir::env); ValueError for other keys."""

class OutputBuffer(Buffer):
    """An output's bytes, owned by the core and lent writably through the buffer protocol."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

class CompiledModel:
    """A HIR module compiled on the RLX CPU runtime."""

    def __init__(self, hir_json: str) -> None: ...
    def set_param(self, name: str, data: Buffer, dtype: str) -> None: ...
    def set_param_range(self, name: str, byte_offset: int, data: Buffer) -> bool: ...
    def set_flush_denormals(self, on: bool) -> None: ...
    def run(self, inputs: list[tuple[str, Buffer, str]]) -> list[tuple[OutputBuffer, str, list[int]]]: ...
    def output_dtypes(self) -> list[str]: ...

def generalize(
    hir_jsons: list[str], sizes: list[tuple[int, list[int]]], names: list[tuple[int, str]], probes: int
) -> tuple[str, list[int]]:
    """One symbolic graph (`.rlxmodel` text) from the HIR JSON of a program at several bindings
    (the first `probes` generalized from, the rest checks), and the indices of the checks it does
    not reproduce. `sizes` gives each RLX symbol number with its size in each, `names` its name in
    the text. RuntimeError names the node where the probes are not one symbolic graph."""

class SymbolicModel:
    """A symbolic RLX graph (`.rlxmodel` text); `compile` specializes and compiles one binding."""

    def __init__(self, text: str) -> None: ...
    def compile(self, binding: list[tuple[int, int]]) -> CompiledModel: ...

def op_to_rust(op_json: str, data_expr: str) -> tuple[str, list[str]]:
    """One op (rlx-ir serde JSON) as a Rust expression, plus the type names it mentions."""
