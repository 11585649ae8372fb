# The Python package's tests (unittest, one feature per file) and the Python examples, run with
# ${Python3_EXECUTABLE} against the build tree's package. run.py exits 77 (ctest: skipped) when
# every test of a file skipped, e.g. for want of numpy or torch.
set(_py_env PYTHONPATH=${CMAKE_BINARY_DIR}/python THUB_SOURCE_DIR=${PROJECT_SOURCE_DIR}
    PYTHONPYCACHEPREFIX=${CMAKE_BINARY_DIR}/python/pycache)  # no __pycache__ in the sources
set(_py_run ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/tests/run.py)
# (test name, file)
foreach(pair Vocabulary:vocabulary Context:context Numpy:numpy Tensors:tensors AllocMem:alloc_mem
             Requests:requests Gil:gil Torch:torch Multiprocess:multiprocess CInterop:c_interop)
  string(REPLACE ":" ";" pair ${pair})
  list(GET pair 0 name)
  list(GET pair 1 file)
  add_test(NAME Python${name}Test COMMAND ${_py_run} test_${file})
  set_tests_properties(Python${name}Test PROPERTIES LABELS unit TIMEOUT 120
                       ENVIRONMENT "${_py_env}" SKIP_RETURN_CODE 77)
endforeach()

# The C rollout of examples/ against a Python trainer (skipped where examples/ is not built).
set_property(TEST PythonCInteropTest APPEND PROPERTY ENVIRONMENT
             "THUB_TRAINER_ROLLOUT=$<$<TARGET_EXISTS:trainer_rollout>:$<TARGET_FILE:trainer_rollout>>")

# The paper's two loops with a torch module: co-located, and a standalone rollout process
# started by the co-located trainer (as examples/trainer_rollout.c does).
set(_py_examples ${PROJECT_SOURCE_DIR}/examples/python)
add_test(NAME ExamplePythonColocated
         COMMAND ${_py_run} --needs torch -- ${_py_examples}/colocated.py --steps 4)
add_test(NAME ExamplePythonRollout
         COMMAND ${_py_run} --needs torch -- ${_py_examples}/colocated.py --steps 4
                 --rollout ${_py_examples}/rollout.py)
set_tests_properties(ExamplePythonColocated ExamplePythonRollout PROPERTIES LABELS example TIMEOUT 120
                     ENVIRONMENT "${_py_env}" SKIP_RETURN_CODE 77)

# The installed package (cmake --install into a scratch prefix) with the installed library.
add_test(NAME PythonInstalledTest COMMAND ${_py_run} test_installed)
set_tests_properties(PythonInstalledTest PROPERTIES LABELS "unit;install" TIMEOUT 300 SKIP_RETURN_CODE 77
  ENVIRONMENT "THUB_BUILD_DIR=${CMAKE_BINARY_DIR};THUB_CMAKE=${CMAKE_COMMAND};THUB_PYTHON_INSTALL_DIR=${THUB_PYTHON_INSTALL_DIR}")
