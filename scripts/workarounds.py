"""Write the list of workaround markers (``# workaround: ...``) into docs/contributing.md.

python scripts/workarounds.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers.workarounds import DOC, in_doc, listed, markers

text = DOC.read_text()
DOC.write_text(text.replace(in_doc(text), listed(markers())))
print(f"wrote {len(markers())} workarounds to {DOC}")
