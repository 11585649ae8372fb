"""Context, Model and Request: the C API's handles as Python objects.

Every blocking method (Model.replicate, update, unpublish, close; Request.wait; waitall) runs
its C call without the GIL (ctypes.CDLL), so other Python threads go on meanwhile. As in C, a
Context may be used from several threads at once, a Model by one thread at a time.
"""
import atexit
import ctypes
import enum
import numbers
import threading
import weakref

from . import _vocabulary
from ._lib import lib
from ._tensors import MEM_CUDA, tensor_memory

Status = enum.IntEnum("Status", [(name, number) for name, number, _ in _vocabulary.STATUS_CODES])
Status.__doc__ = "The THUB_* status codes of include/tensorhub/tensorhub.h, without the THUB_ prefix."

LATEST = _vocabulary.LATEST
STAT_KEYS = tuple(key for key, _ in _vocabulary.STAT_KEYS)

_ERROR_BUF = 4096


def latest_minus(k):
    """THUB_LATEST_MINUS(k): the k-th version before the newest one (latest_minus(0) == LATEST)."""
    k = int(k)
    if k < 0:
        raise ValueError("latest_minus(k) needs k >= 0, not %d" % k)
    return LATEST - k


def error_string(code):
    """THUB_Error_string: the code's name, meaning and a hint."""
    return lib.THUB_Error_string(int(code)).decode()


class TensorHubError(Exception):
    """A THUB_* call failed: .code (a Status), .detail (THUB_Last_error's text), .function."""

    def __init__(self, code, detail="", function=""):
        try:
            code = Status(code)
        except ValueError:
            pass
        self.code = code
        self.detail = detail
        self.function = function
        text = error_string(code)
        where = function + ": " if function else ""
        super().__init__(where + text + (" | " + detail if detail else ""))


def _last_error(ctx_handle):
    buf = ctypes.create_string_buffer(_ERROR_BUF)
    if lib.THUB_Last_error(ctx_handle, buf, _ERROR_BUF) != 0:
        return ""
    return buf.value.decode(errors="replace")


def _check(status, function, ctx_handle=None):
    if status < 0:
        raise TensorHubError(status, _last_error(ctx_handle), function)
    return status


def _info_value(key, value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return ",".join(value)  # e.g. registry=["host:port", "backup:port"]
    raise TypeError("info key %r: a value must be a str, int, bool or a list of str, not %s"
                    % (key, type(value).__name__))


class _Info:
    """A THUB_Info made from a dict (None values are left out), freed on exit."""

    def __init__(self, info):
        self.handle = ctypes.c_void_p()
        if not any(v is not None for v in info.values()):
            return  # THUB_INFO_NULL
        _check(lib.THUB_Info_create(ctypes.byref(self.handle)), "THUB_Info_create")
        try:
            for key, value in info.items():
                if value is not None:
                    _check(lib.THUB_Info_set(self.handle, key.encode(), _info_value(key, value).encode()),
                           "THUB_Info_set")
        except BaseException:
            self.free()
            raise

    def free(self):
        if self.handle:
            lib.THUB_Info_free(ctypes.byref(self.handle))

    def __enter__(self):
        return self.handle

    def __exit__(self, *exc):
        self.free()


def version():
    """THUB_Get_version: the running library's (major, minor, patch)."""
    v = [ctypes.c_int() for _ in range(3)]
    _check(lib.THUB_Get_version(*[ctypes.byref(x) for x in v]), "THUB_Get_version")
    return tuple(x.value for x in v)


def library_version():
    """THUB_Get_library_version: the library's version, its UCX, whether it has CUDA."""
    buf = ctypes.create_string_buffer(1024)
    _check(lib.THUB_Get_library_version(buf, len(buf)), "THUB_Get_library_version")
    return buf.value.decode()


_live_contexts = weakref.WeakSet()


@atexit.register
def _close_live_contexts():
    # A context left open at exit still has a progress thread reading registered memory.
    for ctx in list(_live_contexts):
        try:
            ctx.close()
        except Exception:
            pass


class _Closing:
    """A context manager that closes the object at the end of the block, and when collected."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Context(_Closing):
    """THUB_Init / THUB_Finalize: one per process (or per GPU).

    Context(registry=None, **info): `registry` is the info key of that name ("host:port[,...]";
    None: an embedded registry in this process, unless $TENSORHUB_REGISTRY says otherwise); every
    other keyword is an info key of THUB_Init (bool -> "true"/"false", int -> str, a list of str ->
    comma-separated, None -> unset).
    """

    def __init__(self, registry=None, **info):
        info = dict(info, registry=registry)
        self._handle = ctypes.c_void_p()
        self._models = weakref.WeakSet()
        self._blocks = weakref.WeakValueDictionary()  # address -> memory from alloc_mem still referenced
        self._lock = threading.Lock()
        with _Info(info) as handle:
            _check(lib.THUB_Init(handle, ctypes.byref(self._handle)), "THUB_Init", None)
        _live_contexts.add(self)

    def _h(self, function):
        if not self._handle:
            raise TensorHubError(Status.ERR_ARG, "the context is closed", function)
        return self._handle

    @property
    def closed(self):
        return not self._handle

    @property
    def registry_address(self):
        """THUB_Registry_address: "host:port" of the registry this context uses."""
        buf = ctypes.create_string_buffer(1024)
        h = self._h("THUB_Registry_address")
        _check(lib.THUB_Registry_address(h, buf, len(buf)), "THUB_Registry_address", h)
        return buf.value.decode()

    def last_error(self):
        """THUB_Last_error: the detail of this context's last failure."""
        return _last_error(self._handle if self._handle else None)

    def open(self, model, replica, shard=0, num_shards=1, **info):
        """THUB_Open: this process's shard of one replica of a model (info: THUB_Open's keys)."""
        h = self._h("THUB_Open")
        m = ctypes.c_void_p()
        with _Info(info) as ih:
            _check(lib.THUB_Open(h, model.encode(), replica.encode(), int(shard), int(num_shards), ih,
                                 ctypes.byref(m)), "THUB_Open", h)
        obj = Model(self, m, model, replica, shard, num_shards)
        self._models.add(obj)
        return obj

    def alloc_mem(self, nbytes):
        """THUB_Alloc_mem: `nbytes` of host memory that readers on this host map and copy from
        themselves (the fastest memory to serve from). A writable buffer: make tensors of it
        with numpy.frombuffer(mem, dtype) or torch.frombuffer(mem, dtype=...) and register those.
        It is freed (THUB_Free_mem) once nothing references it; the context cannot be closed
        while something does."""
        h = self._h("THUB_Alloc_mem")
        if int(nbytes) < 0:
            raise ValueError("alloc_mem: a negative size %d" % nbytes)
        base = ctypes.c_void_p()
        _check(lib.THUB_Alloc_mem(h, int(nbytes), None, ctypes.byref(base)), "THUB_Alloc_mem", h)
        mem = type("HostMemory", (ctypes.c_ubyte * int(nbytes),), {"__del__": _free_mem}).from_address(base.value)
        mem._context = self  # the context outlives its memory
        self._blocks[base.value] = mem
        return mem

    def close(self):
        """THUB_Finalize, after closing the models still open. Closing twice does nothing; closing
        while memory from alloc_mem is still referenced is THUB_ERR_STATE (Finalize would free it)."""
        with self._lock:
            if not self._handle:
                return
            for m in list(self._models):
                m.close()
            if len(self._blocks):
                raise TensorHubError(Status.ERR_STATE, "%d blocks of alloc_mem memory are still referenced: "
                                     "drop them, and the arrays made of them, first" % len(self._blocks),
                                     "THUB_Finalize")
            _check(lib.THUB_Finalize(ctypes.byref(self._handle)), "THUB_Finalize", self._handle)
            _live_contexts.discard(self)

    def __repr__(self):
        return "<tensorhub.Context %s>" % ("closed" if self.closed else self.registry_address)


def _free_mem(mem):
    ctx = mem.__dict__.get("_context")
    if ctx is not None and ctx._handle:
        lib.THUB_Free_mem(ctx._handle, ctypes.addressof(mem))


class Model(_Closing):
    """One shard of one replica of a model (Context.open). Used by one thread at a time."""

    def __init__(self, ctx, handle, model, replica, shard, num_shards):
        self.context = ctx  # also keeps the context alive while the model is
        self._handle = handle
        self.name, self.replica, self.shard, self.num_shards = model, replica, shard, num_shards
        self._tensors = {}  # name -> TensorMemory (keeps the objects alive while registered)

    def _h(self, function):
        if not self._handle:
            raise TensorHubError(Status.ERR_ARG, "the model is closed", function)
        return self._handle

    def _check(self, status, function):
        return _check(status, function, self.context._handle or None)

    @property
    def closed(self):
        return not self._handle

    @property
    def tensors(self):
        """The registered tensor objects, by name, in registration order."""
        return {name: mem.obj for name, mem in self._tensors.items()}

    def register(self, name, tensor):
        """THUB_Register `tensor` in place (no copy): a numpy array, a torch tensor (CPU or CUDA),
        or any object with __array_interface__, __cuda_array_interface__, __dlpack__ or the buffer
        protocol; C-contiguous and writable. The model keeps a reference until it is closed."""
        h = self._h("THUB_Register")
        mem = tensor_memory(name, tensor)
        self._check(lib.THUB_Register(h, name.encode(), mem.addr, mem.nbytes, mem.memtype), "THUB_Register")
        self._tensors[name] = mem

    def register_module(self, module, prefix=""):
        """Register a torch.nn.Module's parameters and buffers by their state-dict names; see
        tensorhub.register_module."""
        from ._torch import register_module
        return register_module(self, module, prefix)

    def _sync_cuda(self):
        # Publish promises that the tensors hold the version: wait for torch's queued kernels.
        devices = {mem.obj.device for mem in self._tensors.values()
                   if mem.memtype == MEM_CUDA and type(mem.obj).__module__.startswith("torch")}
        if devices:
            import torch
            for device in devices:
                torch.cuda.current_stream(device).synchronize()

    def publish(self, version):
        """THUB_Publish: the registered tensors hold `version` (>= 0) and will not change until
        unpublish returns. Torch CUDA tensors' current streams are synchronized first."""
        h = self._h("THUB_Publish")
        self._sync_cuda()
        self._check(lib.THUB_Publish(h, int(version)), "THUB_Publish")

    def replicate(self, version=LATEST):
        """THUB_Replicate: fetch `version` (absolute, LATEST or latest_minus(k)) into the tensors;
        returns the absolute version now held."""
        h = self._h("THUB_Replicate")
        got = ctypes.c_int64()
        self._check(lib.THUB_Replicate(h, int(version), ctypes.byref(got)), "THUB_Replicate")
        return got.value

    def update(self, version=LATEST):
        """THUB_Update: move to a newer version; returns it, or None when nothing newer is
        available (THUB_NOT_UPDATED; the old version is still held)."""
        h = self._h("THUB_Update")
        got = ctypes.c_int64()
        st = self._check(lib.THUB_Update(h, int(version), ctypes.byref(got)), "THUB_Update")
        return None if st == Status.NOT_UPDATED else got.value

    def unpublish(self):
        """THUB_Unpublish: returns once no peer reads the tensors; then they may be overwritten."""
        h = self._h("THUB_Unpublish")
        self._check(lib.THUB_Unpublish(h), "THUB_Unpublish")

    def _start(self, kind, function, call):
        h = self._h(function)
        req = ctypes.c_void_p()
        self._check(call(h, ctypes.byref(req)), function)
        return Request(self, req, kind)

    def ireplicate(self, version=LATEST):
        """THUB_Ireplicate: a Request whose wait() returns the version held."""
        return self._start("replicate", "THUB_Ireplicate", lambda h, r: lib.THUB_Ireplicate(h, int(version), r))

    def iupdate(self, version=LATEST):
        """THUB_Iupdate: a Request whose wait() returns the version held, or None (not updated)."""
        return self._start("update", "THUB_Iupdate", lambda h, r: lib.THUB_Iupdate(h, int(version), r))

    def iunpublish(self):
        """THUB_Iunpublish: a Request whose wait() returns None once no peer reads the tensors."""
        return self._start("unpublish", "THUB_Iunpublish", lambda h, r: lib.THUB_Iunpublish(h, r))

    def stat(self, key=None):
        """THUB_Model_stat: one counter (stat("gets")), or every one as a dict (stat())."""
        h = self._h("THUB_Model_stat")
        value = ctypes.c_int64()
        if key is not None:
            self._check(lib.THUB_Model_stat(h, key.encode(), ctypes.byref(value)), "THUB_Model_stat")
            return value.value
        out = {}
        for k in STAT_KEYS:
            self._check(lib.THUB_Model_stat(h, k.encode(), ctypes.byref(value)), "THUB_Model_stat")
            out[k] = value.value
        return out

    def close(self):
        """THUB_Close: unpublish if needed, deregister the tensors, free the handle. Closing twice
        does nothing; closing with a request outstanding is THUB_ERR_STATE."""
        if not self._handle:
            return
        if self.context._handle:
            self._check(lib.THUB_Close(ctypes.byref(self._handle)), "THUB_Close")
        self._handle = ctypes.c_void_p()  # (a finalized context has closed it already)
        self._tensors = {}

    def __repr__(self):
        return "<tensorhub.Model %s/%s shard %d of %d%s>" % (
            self.name, self.replica, self.shard, self.num_shards, " closed" if self.closed else "")


class Request:
    """A nonblocking operation (THUB_Request). wait() blocks (without the GIL) and returns the
    operation's result; test() returns whether it is done; both raise TensorHubError when the
    operation failed. Dropped unfinished, it is freed with THUB_Request_free (it still completes)."""

    def __init__(self, model, handle, kind):
        self.model = model  # keeps the model, hence its tensors, alive while the request runs
        self._handle = handle
        self.kind = kind
        self._done = False
        self._status = None
        self._got = None

    def _finish(self, status, got):
        self._done = True
        self._status = status
        self._got = got

    def _result(self):
        if self._status < 0:
            raise TensorHubError(self._status, _last_error(self.model.context._handle or None),
                                 "THUB_I" + self.kind)
        if self.kind == "unpublish" or self._status == Status.NOT_UPDATED:
            return None
        return self._got

    @property
    def done(self):
        return self._done

    def test(self):
        """THUB_Test: True when the operation has finished (raises if it failed), else False."""
        if not self._done:
            done, got = ctypes.c_int(), ctypes.c_int64()
            st = lib.THUB_Test(ctypes.byref(self._handle), ctypes.byref(done), ctypes.byref(got))
            if not done.value:
                _check(st, "THUB_Test", self.model.context._handle or None)
                return False
            self._finish(st, got.value)
        self._result()
        return True

    def wait(self):
        """THUB_Wait: the result: the version held (replicate, update), None for an update that
        found nothing newer and for an unpublish."""
        if not self._done:
            got = ctypes.c_int64()
            st = lib.THUB_Wait(ctypes.byref(self._handle), ctypes.byref(got))
            self._finish(st, got.value)
        return self._result()

    def cancel(self):
        """THUB_Cancel: ask for cancellation; wait() then raises ERR_CANCELED if it took effect."""
        if not self._done:
            _check(lib.THUB_Cancel(ctypes.byref(self._handle)), "THUB_Cancel", self.model.context._handle or None)

    def __del__(self):
        try:
            if not self._done and self._handle:
                lib.THUB_Request_free(ctypes.byref(self._handle))
        except Exception:
            pass

    def __repr__(self):
        return "<tensorhub.Request %s %s>" % (self.kind, "done" if self._done else "running")


def waitall(requests):
    """THUB_Waitall: wait for every request; returns their results in order, or raises the first
    failure (in list order) once all have finished."""
    requests = list(requests)
    pending = [r for r in requests if not r._done]
    n = len(pending)
    if n:
        handles = (ctypes.c_void_p * n)(*[r._handle.value for r in pending])
        gots = (ctypes.c_int64 * n)()
        statuses = (ctypes.c_int * n)()
        st = lib.THUB_Waitall(n, handles, gots, statuses)
        if st == Status.ERR_ARG and any(handles[i] == pending[i]._handle.value for i in range(n)):
            _check(st, "THUB_Waitall")  # nothing was waited for
        for i, r in enumerate(pending):
            r._handle = ctypes.c_void_p(handles[i])
            r._finish(statuses[i], gots[i])
    return [r._result() for r in requests]
