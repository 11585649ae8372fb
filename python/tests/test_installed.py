"""cmake --install puts the package where THUB_PYTHON_INSTALL_DIR says, and the installed
package loads the installed library (found relative to itself); TENSORHUB_LIBRARY overrides it."""
import os
import subprocess
import sys
import tempfile
import unittest

PROGRAM = """
import os, tensorhub
print(os.path.realpath(tensorhub.__file__))
print(os.path.realpath(tensorhub.library_path))
src, dst = bytearray(b"tensorhub" * 1000), bytearray(9000)
with tensorhub.Context() as ctx:
    t = ctx.open("installed", "trainer"); t.register("w", src); t.publish(4)
    r = ctx.open("installed", "rollout"); r.register("w", dst)
    assert r.replicate() == 4 and dst == src
print("ok")
"""


class InstalledTest(unittest.TestCase):
    def test_installed_package(self):
        build = os.environ.get("THUB_BUILD_DIR")
        dest = os.environ.get("THUB_PYTHON_INSTALL_DIR", "")
        if not build:
            self.skipTest("THUB_BUILD_DIR is not set (ctest sets it)")
        if os.path.isabs(dest):
            self.skipTest("THUB_PYTHON_INSTALL_DIR %s is absolute: not under a scratch prefix" % dest)
        with tempfile.TemporaryDirectory() as prefix:
            prefix = os.path.realpath(prefix)
            subprocess.run([os.environ.get("THUB_CMAKE", "cmake"), "--install", build, "--prefix", prefix],
                           check=True, stdout=subprocess.DEVNULL)
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TENSORHUB_LIBRARY")}
            env["PYTHONPATH"] = os.path.join(prefix, dest)
            out = subprocess.check_output([sys.executable, "-c", PROGRAM], env=env, text=True, cwd=prefix).split("\n")
            self.assertEqual(out[0], os.path.join(prefix, dest, "tensorhub", "__init__.py"))
            self.assertTrue(out[1].startswith(prefix + os.sep), out[1])
            self.assertIn("libtensorhub.so", out[1])
            self.assertEqual(out[2], "ok")

            env["TENSORHUB_LIBRARY"] = out[1]
            path = subprocess.check_output([sys.executable, "-c", "import tensorhub; print(tensorhub.library_path)"],
                                           env=env, text=True, cwd=prefix).strip()
            self.assertEqual(path, out[1])  # the override, as given
            env["TENSORHUB_LIBRARY"] = os.path.join(prefix, "no-such-library.so")
            run = subprocess.run([sys.executable, "-c", "import tensorhub"], env=env, text=True, cwd=prefix,
                                 stderr=subprocess.PIPE)
            self.assertNotEqual(run.returncode, 0)
            self.assertIn("no-such-library.so", run.stderr)  # the override is used, with no fallback


if __name__ == "__main__":
    unittest.main()
