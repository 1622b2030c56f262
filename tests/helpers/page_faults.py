"""Page faults of a training step's allocation pattern, to see which malloc settings a process runs with."""

import subprocess
import sys

from helpers.cli import ROOT

# A step's pattern: 40 blocks of 512 kB allocated, written and freed, 20 times over, after a 1 MB
# block freed once has set glibc's dynamic thresholds. Prints the page faults of the 20 steps.
STEPS = """
import ctypes, resource
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
block = libc.malloc(1 << 20); libc.memset(block, 1, 1 << 20); libc.free(block)
start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    blocks = [libc.malloc(512 << 10) for _ in range(40)]
    for b in blocks:
        libc.memset(b, 1, 512 << 10)
    for b in blocks:
        libc.free(b)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start)
"""


def run_python(code: str) -> str:
    """Run ``code`` in a fresh interpreter at the project root; its stdout."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()
