"""TensorHub for Python: moving model weights between processes (ctypes over libtensorhub.so).

    import tensorhub
    with tensorhub.Context() as ctx:                     # an embedded registry
        m = ctx.open("policy", "trainer")
        m.register("w", weights)                          # numpy, torch, DLPack, ... in place
        m.publish(1)
    ...
    ctx = tensorhub.Context(registry="host:port", timeout_ms=30000)
    m = ctx.open("policy", "rollout-0")
    m.register_module(policy)                             # a torch.nn.Module, by state-dict names
    m.replicate()                                         # latest; then m.update() in a loop

Failures raise TensorHubError (.code, a Status; .detail, the library's text). Blocking calls
release the GIL. The C API's documentation (include/tensorhub/tensorhub.h) applies throughout.
"""
from . import _vocabulary
from ._core import (LATEST, STAT_KEYS, Context, Model, Request, Status, TensorHubError, error_string,
                    latest_minus, library_version, version, waitall)
from ._lib import path as library_path
from ._tensors import MEM_CUDA, MEM_HOST
from ._torch import register_module

# The status codes as module constants: tensorhub.SUCCESS, tensorhub.NOT_UPDATED, tensorhub.ERR_ARG, ...
globals().update({s.name: s for s in Status})

INIT_INFO_KEYS = tuple(k for k, _ in _vocabulary.INIT_INFO_KEYS)
OPEN_INFO_KEYS = tuple(k for k, _ in _vocabulary.OPEN_INFO_KEYS)

__version__ = "%d.%d.%d" % version()

__all__ = ["Context", "Model", "Request", "Status", "TensorHubError", "LATEST", "latest_minus",
           "waitall", "register_module", "error_string", "version", "library_version", "library_path",
           "MEM_HOST", "MEM_CUDA", "STAT_KEYS", "INIT_INFO_KEYS", "OPEN_INFO_KEYS"] + [s.name for s in Status]
