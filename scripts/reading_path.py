"""Write docs/reading_path.md: the files and functions one training step of ``python -m app fit`` runs.

python scripts/reading_path.py
"""

import sys
from pathlib import Path

if __name__ == "__main__":
    root = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(root), str(root / "tests")]
    from helpers.step_trace import DOC, markdown, trace

    DOC.write_text(markdown(trace()))
    print(f"wrote {DOC}")
