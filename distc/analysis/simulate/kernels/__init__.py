"""The kernel families; importing this package fills :data:`..registry.KERNELS`."""

from . import collectives, elementwise, grads, init, nn, optimizers, shape, structural  # noqa: F401
