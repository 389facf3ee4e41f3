"""The explicit list of op families; importing it registers every lowering."""

from . import attention, conv, convert, creation, elementwise, embedding, linalg, norm, reduce, shape

FAMILIES = (attention, conv, convert, creation, elementwise, embedding, linalg, norm, reduce, shape)
