"""docs/reading_path.md (the README's Layout points to it) is what a trace of one training step finds."""

from helpers.step_trace import DOC, markdown, trace


def numbered(text: str) -> list[str]:
    """The list's files and functions; the line counts may move with a library's release."""
    return [line.split(" (", 1)[0] for line in text.splitlines() if line[:1].isdigit()]


def test_the_reading_path_is_the_traced_one():
    rows = trace()
    assert any(file == "models/image_classifier.py" for file, _, _ in rows)  # the trace saw the step
    assert numbered(DOC.read_text()) == numbered(markdown(rows)), "run: python scripts/reading_path.py"
