from skillopt_sleep.documents.block import BLOCK_BEGIN, BLOCK_END
from skillopt_sleep.documents.targets import MAX_DOCUMENT_CHARS, prompt_view


def test_short_documents_are_shown_whole():
    assert prompt_view("# Rules\n- use pnpm\n") == "# Rules\n- use pnpm\n"


def test_a_long_document_always_shows_its_managed_block():
    prose = "".join(f"line {n} of a long CLAUDE.md\n" for n in range(2000))
    block = f"{BLOCK_BEGIN}\n- Use pnpm, never npm.\n{BLOCK_END}\n"
    view = prompt_view(prose + block)
    assert "- Use pnpm, never npm." in view
    assert "[... document truncated ...]" in view
    assert len(view) <= MAX_DOCUMENT_CHARS + 100


def test_a_long_document_without_a_block_is_cut_from_the_end():
    prose = "x" * (MAX_DOCUMENT_CHARS * 2)
    view = prompt_view(prose)
    assert view.startswith("x" * 100) and view.endswith("[... document truncated ...]\n")
