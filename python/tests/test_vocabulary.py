"""The package's constants and prototypes against the library and the header (they must not drift)."""
import ctypes
import os
import re
import unittest

import tensorhub
from tensorhub import _lib, _vocabulary

SOURCE_DIR = os.environ.get("THUB_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def source(path):
    with open(os.path.join(SOURCE_DIR, path), encoding="utf-8") as f:
        return f.read()


class VocabularyTest(unittest.TestCase):
    def test_status_codes_are_the_library_ones(self):
        # THUB_Error_string starts with the code's name: the numbers come from the library itself.
        self.assertGreaterEqual(len(tensorhub.Status), 16)
        for code in tensorhub.Status:
            self.assertTrue(tensorhub.error_string(code).startswith("THUB_%s: " % code.name),
                            (code, tensorhub.error_string(code)))
            self.assertIs(getattr(tensorhub, code.name), code)
        self.assertTrue(tensorhub.error_string(12345).startswith("THUB_ERR_UNKNOWN"))

    def test_status_codes_are_the_table_ones(self):
        table = dict((name[len("THUB_"):], int(number)) for name, number in re.findall(
            r"ROW\(k\w+, (THUB_\w+), (-?\d+),", source("src/common/status.h")))
        self.assertEqual(table, {s.name: int(s) for s in tensorhub.Status})

    def test_stat_keys_are_the_table_ones(self):
        table = re.findall(r'\{"(\w+)",', source("src/common/stat_keys.h"))
        self.assertEqual(list(tensorhub.STAT_KEYS), table)

    def test_every_stat_key_is_known_to_the_library(self):
        with tensorhub.Context() as ctx, ctx.open("vocabulary", "r0") as m:
            stats = m.stat()
            self.assertEqual(list(stats), list(tensorhub.STAT_KEYS))
            self.assertEqual(stats["held_version"], -1)
            self.assertEqual(m.stat("held_version"), -1)
            with self.assertRaises(tensorhub.TensorHubError) as e:
                m.stat("held_versio")
            self.assertEqual(e.exception.code, tensorhub.ERR_ARG)
            self.assertIn("held_version", e.exception.detail)  # the nearest known key

    def test_latest(self):
        self.assertEqual(tensorhub.LATEST, -1)
        self.assertEqual(tensorhub.latest_minus(0), tensorhub.LATEST)
        self.assertEqual(tensorhub.latest_minus(3), -4)  # THUB_LATEST_MINUS(3) = -1 - 3
        with self.assertRaises(ValueError):
            tensorhub.latest_minus(-1)

    def test_memory_types(self):
        header = source("include/tensorhub/tensorhub.h")
        self.assertEqual(tensorhub.MEM_HOST, int(re.search(r"#define THUB_MEM_HOST (\d+)", header).group(1)))
        self.assertEqual(tensorhub.MEM_CUDA, int(re.search(r"#define THUB_MEM_CUDA (\d+)", header).group(1)))

    def test_every_header_function_has_a_prototype(self):
        header = source("include/tensorhub/tensorhub.h")
        declared = set(re.findall(r"^(?:int |const char \*)(THUB_\w+)\(", header, re.M))
        self.assertGreaterEqual(len(declared), 35)
        self.assertEqual(declared, {name for name, _, _ in _lib._PROTOTYPES})

    def test_info_keys(self):
        self.assertIn("registry", tensorhub.INIT_INFO_KEYS)
        self.assertIn("timeout_ms", tensorhub.INIT_INFO_KEYS)
        self.assertEqual(set(tensorhub.OPEN_INFO_KEYS), {"retain", "spot"})
        self.assertEqual(len(tensorhub.INIT_INFO_KEYS), len(_vocabulary.INIT_INFO_KEYS))

    def test_version(self):
        header = source("include/tensorhub/tensorhub.h")
        expected = tuple(int(re.search(r"#define THUB_VERSION_%s (\d+)" % p, header).group(1))
                         for p in ("MAJOR", "MINOR", "PATCH"))
        self.assertEqual(tensorhub.version(), expected)
        self.assertIn("TensorHub", tensorhub.library_version())

    def test_library_is_loaded_with_the_gil_released(self):
        # CDLL (not PyDLL) releases the GIL around foreign calls; test_gil checks it in action.
        self.assertIsInstance(_lib.lib, ctypes.CDLL)
        self.assertNotIsInstance(_lib.lib, ctypes.PyDLL)


if __name__ == "__main__":
    unittest.main()
