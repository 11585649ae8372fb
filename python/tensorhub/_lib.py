"""Loads libtensorhub.so and declares the C functions' prototypes (ctypes).

The library is loaded with ctypes.CDLL, which releases the GIL for the duration of every
foreign call: a thread blocked in THUB_Replicate, THUB_Update, THUB_Unpublish or THUB_Wait
lets the other Python threads run (tests/test_gil.py checks it). ctypes.PyDLL would not.

Where the library is: $TENSORHUB_LIBRARY if set, else the path CMake recorded in
_library.py (the build tree's library, or the installed one), else the dynamic loader's
search for the SONAME.
"""
import ctypes
import os

from . import _library

c_int_p = ctypes.POINTER(ctypes.c_int)
c_int64_p = ctypes.POINTER(ctypes.c_int64)
c_size_t_p = ctypes.POINTER(ctypes.c_size_t)
c_handle = ctypes.c_void_p  # THUB_Context, THUB_Model, THUB_Request, THUB_Info
c_handle_p = ctypes.POINTER(ctypes.c_void_p)


def _candidates():
    env = os.environ.get("TENSORHUB_LIBRARY")
    if env:
        return [env]  # an explicit choice: no fallback that could load another build
    path = _library.PATH
    if not os.path.isabs(path):
        path = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), path))
    return [path, _library.SONAME]


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("tensorhub: cannot load libtensorhub (set TENSORHUB_LIBRARY to its path): "
                      + "; ".join(errors))


lib, path = _load()

# (name, restype, argtypes): every function of include/tensorhub/tensorhub.h.
_PROTOTYPES = [
    ("THUB_Error_string", ctypes.c_char_p, [ctypes.c_int]),
    ("THUB_Last_error", ctypes.c_int, [c_handle, ctypes.c_char_p, ctypes.c_size_t]),
    ("THUB_Info_create", ctypes.c_int, [c_handle_p]),
    ("THUB_Info_set", ctypes.c_int, [c_handle, ctypes.c_char_p, ctypes.c_char_p]),
    ("THUB_Info_get", ctypes.c_int, [c_handle, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, c_int_p]),
    ("THUB_Info_get_valuelen", ctypes.c_int, [c_handle, ctypes.c_char_p, c_size_t_p, c_int_p]),
    ("THUB_Info_delete", ctypes.c_int, [c_handle, ctypes.c_char_p]),
    ("THUB_Info_dup", ctypes.c_int, [c_handle, c_handle_p]),
    ("THUB_Info_get_nkeys", ctypes.c_int, [c_handle, c_int_p]),
    ("THUB_Info_get_nthkey", ctypes.c_int, [c_handle, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]),
    ("THUB_Get_version", ctypes.c_int, [c_int_p, c_int_p, c_int_p]),
    ("THUB_Get_library_version", ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t]),
    ("THUB_Info_free", ctypes.c_int, [c_handle_p]),
    ("THUB_Init", ctypes.c_int, [c_handle, c_handle_p]),
    ("THUB_Finalize", ctypes.c_int, [c_handle_p]),
    ("THUB_Registry_address", ctypes.c_int, [c_handle, ctypes.c_char_p, ctypes.c_size_t]),
    ("THUB_Alloc_mem", ctypes.c_int, [c_handle, ctypes.c_size_t, c_handle, c_handle_p]),
    ("THUB_Free_mem", ctypes.c_int, [c_handle, ctypes.c_void_p]),
    ("THUB_Open", ctypes.c_int, [c_handle, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                 c_handle, c_handle_p]),
    ("THUB_Register", ctypes.c_int, [c_handle, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]),
    ("THUB_Publish", ctypes.c_int, [c_handle, ctypes.c_int64]),
    ("THUB_Replicate", ctypes.c_int, [c_handle, ctypes.c_int64, c_int64_p]),
    ("THUB_Ireplicate", ctypes.c_int, [c_handle, ctypes.c_int64, c_handle_p]),
    ("THUB_Iupdate", ctypes.c_int, [c_handle, ctypes.c_int64, c_handle_p]),
    ("THUB_Iunpublish", ctypes.c_int, [c_handle, c_handle_p]),
    ("THUB_Update", ctypes.c_int, [c_handle, ctypes.c_int64, c_int64_p]),
    ("THUB_Unpublish", ctypes.c_int, [c_handle]),
    ("THUB_Close", ctypes.c_int, [c_handle_p]),
    ("THUB_Test", ctypes.c_int, [c_handle_p, c_int_p, c_int64_p]),
    ("THUB_Wait", ctypes.c_int, [c_handle_p, c_int64_p]),
    ("THUB_Waitall", ctypes.c_int, [ctypes.c_int, c_handle_p, c_int64_p, c_int_p]),
    ("THUB_Testany", ctypes.c_int, [ctypes.c_int, c_handle_p, c_int_p, c_int_p, c_int64_p]),
    ("THUB_Request_free", ctypes.c_int, [c_handle_p]),
    ("THUB_Cancel", ctypes.c_int, [c_handle_p]),
    ("THUB_Model_stat", ctypes.c_int, [c_handle, ctypes.c_char_p, c_int64_p]),
]

for _name, _restype, _argtypes in _PROTOTYPES:
    _f = getattr(lib, _name)
    _f.restype = _restype
    _f.argtypes = _argtypes
