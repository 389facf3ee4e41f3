"""The explicit list of op families; importing it registers every lowering."""

from . import (
    attention,
    conv,
    convert,
    creation,
    elementwise,
    embedding,
    image,
    indexing,
    linalg,
    norm,
    reduce,
    rnn,
    shape,
)

FAMILIES = (
    attention,
    conv,
    convert,
    creation,
    elementwise,
    embedding,
    image,
    indexing,
    linalg,
    norm,
    reduce,
    rnn,
    shape,
)
