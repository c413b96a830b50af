"""The test kit: what the end-to-end drivers, property tests, fixture probes and
benchmarks share for running zero-opt and zero-run.

  zerokit.mpi    Open MPI's environment and the mpirun command line: the only
                 place under test/ and bench/ that sets an OMPI_ variable or
                 passes --oversubscribe (drivers and benchmarks import it, lit's
                 %mpirun is built from it in test/lit.cfg.py, CMake sets none;
                 test/Structure/mpi-env.test checks it).
  zerokit.cluster  a cluster of network-namespace nodes on this machine
                 (scripts/cluster.sh) for the multi-node drivers, always
                 brought down again.
  zerokit.tools  running a tool: in a session directory of its own (call), or
                 failing the driver when it fails (run).
  zerokit.data   data the drivers share (the GPL-3 byte tokens).
  zerokit.quant  qwZ's quantization written out (the references of the qwZ
                 drivers).

scripts/setup-pyenv.sh puts test/kit on the test virtualenv's path (a .pth
file), so `from zerokit import mpi, tools` works in build/pyenv/bin/python.
"""
