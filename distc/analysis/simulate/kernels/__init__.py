"""The kernel families; importing this package fills :data:`..registry.KERNELS`."""

from . import (  # noqa: F401
    activation, collectives, control, conv, elementwise, fused, grads, index, init, moe, nn, norm, optimizers, randomness,
    reduce, shape, structural, views,
)
