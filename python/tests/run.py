"""Runs one test file of python/tests (run.py test_numpy), or a program when modules import
(run.py --needs torch -- prog.py args...). Exit status: 0 passed, 1 failed, 77 (ctest's
SKIP_RETURN_CODE) when every test skipped or a needed module is missing."""
import importlib
import os
import subprocess
import sys
import unittest

SKIPPED = 77


def run_program(argv):
    needs = []
    while argv and argv[0] == "--needs":
        needs.append(argv[1])
        argv = argv[2:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    for module in needs:
        try:
            importlib.import_module(module)
        except ImportError as e:
            print("SKIP: %s needs the Python module %s (%s), which %s cannot import"
                  % (os.path.basename(argv[0]), module, e, sys.executable))
            return SKIPPED
    return subprocess.call([sys.executable] + argv)


def run_tests(name):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    suite = unittest.defaultTestLoader.loadTestsFromName(name)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        return 1
    if result.testsRun and len(result.skipped) == result.testsRun:
        print("SKIP: every test of %s skipped" % name)
        return SKIPPED
    return 0


if __name__ == "__main__":
    if sys.argv[1] in ("--needs", "--"):
        sys.exit(run_program(sys.argv[1:]))
    sys.exit(run_tests(sys.argv[1]))
