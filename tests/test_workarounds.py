"""docs/contributing.md lists every workaround marker of app/, data/ and models/, as the code has them."""

from helpers.workarounds import DOC, in_doc, listed, markers


def test_the_doc_lists_the_markers_the_code_has():
    found = markers()
    assert len(found) >= 20
    assert all("; gone when " in text for _, text in found), [m for m in found if "; gone when " not in m[1]]
    assert in_doc(DOC.read_text()) == listed(found), "run: python scripts/workarounds.py"


def test_the_check_sees_a_marker_missing_from_the_doc(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "x.py").write_text("# workaround: lib issue 1; gone when lib 2 is the floor\n")
    found = markers(tmp_path)
    assert found == [("app/x.py", "lib issue 1; gone when lib 2 is the floor")]
    assert listed(found) != listed([])
