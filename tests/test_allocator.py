"""glibc's malloc as the app sets it: a training step's freed memory is reused, not faulted in again."""

import subprocess
import sys

from conftest import ROOT

from app.allocator import keep_freed_memory

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


def page_faults(prelude: str) -> int:
    code = prelude + STEPS
    return int(subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, check=True).stdout)


def test_importing_the_app_keeps_freed_memory_for_the_next_step():
    plain, tuned = page_faults(""), page_faults("import app\n")
    print(f"page faults over 20 steps: glibc's defaults {plain}, after importing app {tuned}")
    assert plain > 20 * 40 * 128 // 2  # glibc trimmed the heap and faulted the blocks in again
    assert tuned < plain / 5


def test_the_users_allocator_settings_are_left_alone(monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1000000")
    assert keep_freed_memory() is False
