"""What memory a tensor object is: (address, bytes, memory type, objects to keep alive).

TensorHub reads and writes a registered tensor's memory in place, so only an object that
hands out its own memory qualifies: C-contiguous (one dense byte range whose layout every
replica shares) and writable. Nothing is ever copied; an object that cannot be registered as
it is raises TypeError or ValueError saying why and what to do.

Recognised, in this order: torch tensors (CPU or CUDA), __cuda_array_interface__ (CuPy,
Numba, ...), __array_interface__ (numpy, ...), DLPack (__dlpack__) and the buffer protocol
(bytearray, array.array, mmap, writable memoryviews).
"""
import ctypes

from ._vocabulary import MEM_TYPES

_MEM = dict(MEM_TYPES)
MEM_HOST = _MEM["MEM_HOST"]
MEM_CUDA = _MEM["MEM_CUDA"]


class TensorMemory:
    """One tensor's memory: its start, size in bytes, THUB_MEM_* type, and what holds it."""

    __slots__ = ("addr", "nbytes", "memtype", "obj", "keepalive")

    def __init__(self, addr, nbytes, memtype, obj, keepalive=()):
        self.addr = addr
        self.nbytes = nbytes
        self.memtype = memtype
        self.obj = obj  # the object registered
        self.keepalive = keepalive  # what else keeps the memory from being freed (a DLPack capsule, ...)


def _is_torch_tensor(obj):
    t = type(obj)
    return t.__module__.startswith("torch") and hasattr(obj, "data_ptr") and hasattr(obj, "is_contiguous")


def _from_torch(name, t):
    if str(t.layout) != "torch.strided":
        raise TypeError("tensor %r: only dense (strided) torch tensors can be registered, not %s"
                        % (name, t.layout))
    if not t.is_contiguous():
        raise ValueError("tensor %r: a torch tensor that is not contiguous cannot be registered in "
                         "place; register t.contiguous() (a copy) and keep that one" % name)
    device = t.device.type
    if device == "cpu":
        memtype = MEM_HOST
    elif device == "cuda":
        memtype = MEM_CUDA
    else:
        raise TypeError("tensor %r: torch device %r is neither CPU nor CUDA" % (name, str(t.device)))
    return TensorMemory(t.data_ptr(), t.numel() * t.element_size(), memtype, t)


def _itemsize(typestr):
    try:
        return int(typestr[2:])
    except (TypeError, ValueError):
        raise TypeError("array interface typestr %r has no item size" % (typestr,))


def _c_contiguous(shape, strides, itemsize):
    if strides is None:
        return True
    expected = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent > 1 and stride != expected:
            return False
        expected *= extent
    return True


def _from_array_interface(name, obj, iface, memtype, which):
    if iface.get("mask") is not None:
        raise ValueError("tensor %r: a masked array cannot be registered" % name)
    data = iface.get("data")
    if not isinstance(data, tuple):
        return None  # data given as a buffer object (or absent): try the buffer protocol
    addr, readonly = data
    if readonly:
        raise ValueError("tensor %r is read-only: replicate and update write into it; register a "
                         "writable array (e.g. numpy.array(a) makes a writable copy)" % name)
    shape = tuple(iface["shape"])
    itemsize = _itemsize(iface["typestr"])
    if not _c_contiguous(shape, iface.get("strides"), itemsize):
        raise ValueError("tensor %r is not C-contiguous (%s strides %s): register "
                         "numpy.ascontiguousarray(a) (a copy) and keep that one"
                         % (name, which, iface.get("strides")))
    count = 1
    for extent in shape:
        count *= extent
    return TensorMemory(addr + iface.get("offset", 0), count * itemsize, memtype, obj)


# DLPack (dlpack.h, v0.x ABI, as numpy >= 1.22 and torch >= 1.10 export it)
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13

_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _from_dlpack(name, obj):
    # The capsule is not consumed (not renamed "used_dltensor"): while we hold it the producer's
    # memory stays alive, and when we drop it the capsule's destructor calls the deleter.
    capsule = obj.__dlpack__()
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    device = t.device.device_type
    if device in (_DL_CPU, _DL_CUDA_HOST):
        memtype = MEM_HOST
    elif device in (_DL_CUDA, _DL_CUDA_MANAGED):
        memtype = MEM_CUDA
    else:
        raise TypeError("tensor %r: DLPack device type %d is neither CPU nor CUDA" % (name, device))
    if t.dtype.lanes != 1 or t.dtype.bits % 8:
        raise TypeError("tensor %r: DLPack dtype of %d bits x %d lanes is not a whole number of bytes"
                        % (name, t.dtype.bits, t.dtype.lanes))
    itemsize = t.dtype.bits // 8
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = None
    if t.strides:  # DLPack strides count elements, not bytes
        strides = tuple(t.strides[i] * itemsize for i in range(t.ndim))
    if not _c_contiguous(shape, strides, itemsize):
        raise ValueError("tensor %r is not C-contiguous (DLPack strides %s): register a contiguous "
                         "copy and keep that one" % (name, strides))
    count = 1
    for extent in shape:
        count *= extent
    return TensorMemory((t.data or 0) + t.byte_offset, count * itemsize, memtype, obj, capsule)


def _from_buffer(name, obj):
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError("tensor %r: a %s is not a tensor TensorHub can register: give a numpy "
                        "array, a torch tensor, or an object with __array_interface__, "
                        "__cuda_array_interface__, __dlpack__ or the buffer protocol"
                        % (name, type(obj).__name__)) from None
    if view.readonly:
        raise ValueError("tensor %r is read-only (a %s): replicate and update write into it; "
                         "register a writable buffer (e.g. bytearray)" % (name, type(obj).__name__))
    if not view.c_contiguous:
        raise ValueError("tensor %r is not C-contiguous: register a contiguous copy" % name)
    if view.nbytes == 0:
        return TensorMemory(None, 0, MEM_HOST, obj)
    # from_buffer keeps an export of the buffer: a bytearray cannot be resized under us.
    anchor = (ctypes.c_char * view.nbytes).from_buffer(view)
    return TensorMemory(ctypes.addressof(anchor), view.nbytes, MEM_HOST, obj, (view, anchor))


def tensor_memory(name, obj):
    """The memory of `obj` (see the module's text); raises TypeError or ValueError."""
    if _is_torch_tensor(obj):
        return _from_torch(name, obj)
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is not None:
        mem = _from_array_interface(name, obj, iface, MEM_CUDA, "__cuda_array_interface__")
        if mem is None:
            raise TypeError("tensor %r: __cuda_array_interface__ without a data pointer" % name)
        return mem
    iface = getattr(obj, "__array_interface__", None)
    if iface is not None:
        mem = _from_array_interface(name, obj, iface, MEM_HOST, "__array_interface__")
        if mem is not None:
            return mem
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(name, obj)
    return _from_buffer(name, obj)
