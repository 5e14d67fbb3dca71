"""observe_scene's one argument: the focus is validated before any capture (each refusal
saying exactly why), trimmed, and nothing else is accepted."""

from __future__ import annotations

import pytest
from observe_scene_helpers import code, make, reason

from solarian_agent.perception.observe_scene import ObserveSceneRejected


@pytest.mark.parametrize("focus,expected", [
    ("", "focus_empty"), ("   \n ", "focus_empty"), (None, "focus_type"), (12, "focus_type"),
    ("x" * 301, "focus_too_long"), ("the\x07cup", "focus_control"),
    ("the cup\nand the tray", "focus_control"), ("tab\there", "focus_control"),
    ("zero\u200bwidth", "focus_control"), ("line\u2028sep", "focus_control"),
])
def test_invalid_focus_is_rejected_before_capture(focus, expected):
    obs, cam, be, _, _ = make()
    assert code(lambda: obs.observe_scene(focus)) == expected
    assert cam.captures == 0 and be.calls == 0


@pytest.mark.parametrize("focus, message", [
    (12, "focus must be a string, got int"),
    ("  ", "focus must not be empty"),
    ("x" * 301, "focus has 301 characters; at most 300 are allowed"),
    ("a\x07b\x08c\x0bd\x0ce", "focus contains control characters ('\\x07', '\\x08', '\\x0b')"),
    ("surrogate \ud800 here", "focus contains control characters ('\\ud800')"),
    ("private \ue000 use", "focus contains control characters ('\\ue000')"),
    ("unassigned \u0378 here", "focus contains control characters ('\\u0378')"),
    ("para\u2029sep", "focus contains control characters ('\\u2029')"),
])
def test_focus_rejections_say_exactly_why(focus, message):
    obs, *_ = make()
    assert reason(lambda: obs.observe_scene(focus))[1] == message


def test_focus_is_trimmed_and_300_characters_are_allowed():
    obs, cam, be, _, _ = make()
    res = obs.observe_scene("  " + "y" * 300 + "\n")
    assert res.focus == "y" * 300
    assert obs.observe_scene("  where is the cup? ").focus == "where is the cup?"


def test_a_focus_with_plain_spaces_inside_is_fine():
    obs, *_ = make()
    assert obs.observe_scene("the red  cup").focus == "the red  cup"


def test_no_other_argument_is_accepted():
    obs, cam, be, _, _ = make()
    for extra in ({"camera": "overhead"}, {"model": "x"}, {"crop": [0, 0, 1, 1]},
                  {"frames": 2}):
        assert code(lambda e=extra: obs.handle({"focus": "cup", **e})) == "extra_argument"
    assert cam.captures == 0
    assert obs.handle({"focus": "cup"}).description


def test_an_extra_argument_s_refusal_names_everything_focus_cannot_select() -> None:
    obs, cam, _, _, events = make()
    with pytest.raises(ObserveSceneRejected) as e:
        obs.handle({"focus": "cup", "resolution": "4k"})
    want = ("observe_scene takes only focus; got resolution (it cannot select a camera, file, "
            "URL, crop, exposure, resolution, provider, model or frame count)")
    assert (e.value.code, e.value.reason) == ("extra_argument", want)
    assert events == [("observe_scene_rejected", {"code": "extra_argument", "reason": want})]
    assert cam.captures == 0
