"""extract_json: the first JSON object/array in a model's reply, or None."""

from __future__ import annotations

from skillopt_sleep.backends.jsonextract import extract_json


def test_whole_text_that_is_json_is_returned_as_is():
    assert extract_json('  {"edits": [], "ok": true}\n') == {"edits": [], "ok": True}


def test_a_top_level_array_is_returned():
    assert extract_json('[{"op": "add"}, {"op": "delete"}]') == [{"op": "add"}, {"op": "delete"}]


def test_json_inside_a_json_fence_after_prose_is_found():
    text = 'Here are my edits:\n```json\n{"edits": [{"op": "add", "content": "Use pytest"}]}\n```\nDone.'
    assert extract_json(text) == {"edits": [{"op": "add", "content": "Use pytest"}]}


def test_json_inside_a_plain_fence_is_found():
    assert extract_json('```\n{"score": 0.5}\n```') == {"score": 0.5}


def test_first_balanced_object_in_free_text_is_found():
    assert extract_json('Sure! {"score": 7, "why": "ok"} Hope that helps {"other": 1}') == {"score": 7, "why": "ok"}


def test_braces_inside_json_strings_do_not_cut_the_object_short():
    text = 'Result: {"content": "if x { return } else {", "n": 2} trailing'
    assert extract_json(text) == {"content": "if x { return } else {", "n": 2}


def test_an_unbalanced_brace_before_the_json_is_skipped():
    assert extract_json('Note: {oops. Answer: {"a": 1}') == {"a": 1}


def test_a_think_block_with_braces_is_ignored():
    text = '<think>maybe {"a": 0} is right?</think>\n{"a": 1}'
    assert extract_json(text) == {"a": 1}


def test_scalars_are_not_a_structure():
    assert extract_json("42") is None
    assert extract_json('"just a string"') is None


def test_text_without_json_gives_none():
    assert extract_json("I could not decide, sorry.") is None
    assert extract_json("") is None


def test_truncated_json_gives_none_rather_than_a_partial_object():
    assert extract_json('{"edits": [{"op": "add", "content": "Use') is None
