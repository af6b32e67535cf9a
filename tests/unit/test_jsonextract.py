"""extract_json: the first JSON object/array in a model's reply, or None."""

from __future__ import annotations

import pytest

from skillopt_sleep.backends.jsonextract import extract_json


@pytest.mark.parametrize(("text", "expected"), [
    ('  {"edits": [], "ok": true}\n', {"edits": [], "ok": True}),
    ('[{"op": "add"}, {"op": "delete"}]', [{"op": "add"}, {"op": "delete"}]),
    ('Here are my edits:\n```json\n{"edits": [{"op": "add", "content": "Use pytest"}]}\n```\nDone.',
     {"edits": [{"op": "add", "content": "Use pytest"}]}),
    ('```\n{"score": 0.5}\n```', {"score": 0.5}),
    ('Sure! {"score": 7, "why": "ok"} Hope that helps {"other": 1}', {"score": 7, "why": "ok"}),
    ('Result: {"content": "if x { return } else {", "n": 2} trailing', {"content": "if x { return } else {", "n": 2}),
    ('Note: {oops. Answer: {"a": 1}', {"a": 1}),
    ('<think>maybe {"a": 0} is right?</think>\n{"a": 1}', {"a": 1}),
], ids=["whole-text-is-json-returned-as-is", "a-top-level-array", "inside-a-json-fence-after-prose",
        "inside-a-plain-fence", "the-first-balanced-object-in-free-text", "braces-inside-strings-do-not-cut-it-short",
        "an-unbalanced-brace-before-it-is-skipped", "a-think-block-with-braces-is-ignored"])
def test_the_first_json_structure_is_found(text, expected):
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", [
    "42",
    '"just a string"',
    "I could not decide, sorry.",
    "",
    '{"edits": [{"op": "add", "content": "Use',
], ids=["a-number-is-not-a-structure", "a-string-is-not-a-structure", "text-without-json", "empty-text",
        "truncated-json-rather-than-a-partial-object"])
def test_no_json_structure_gives_none(text):
    assert extract_json(text) is None
