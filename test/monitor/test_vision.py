"""Vision backends: the model backend's request and typed answers over any provider, and the
offline cv backend on simulator close-ups."""

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from monitor_helpers import PROGRESS

from solarian_agent.core.model_api import ModelError
from solarian_agent.models.scripted import ScriptedProvider, reply
from solarian_agent.models.tool_args import is_strict_schema
from solarian_agent.perception.cv_monitor import CvVisionBackend, measure
from solarian_agent.perception.vision import (
    FrameForVision,
    ModelVisionBackend,
    MonitorImage,
    MonitorTickRequest,
    VisionBackend,
    answer_schema,
    extract_json,
    question_from_dict,
)

TICKS = Path(__file__).resolve().parents[1] / "data" / "monitor_ticks"


def img(label, marked=False, reference=False, camera="wrist"):
    px = np.full((40, 60, 3), 90, np.uint8)
    return MonitorImage(camera, label, 1.5 if label == "previous" else 0.0, b"\x89PNG..",
                        "image/png", 60, 40, px, True, reference,
                        (5, 5, 10, 10) if marked else None)


def request(**kw):
    qs = (question_from_dict(PROGRESS), question_from_dict({"name": "held"}))
    base = dict(action_id="a1", tool="pick", elapsed_s=3.0, questions=qs,
                images=(img("previous"), img("current")), readings={"gripper": {"mm": 40}},
                instructions="Grey fingers come up from the bottom.")
    return MonitorTickRequest(**{**base, **kw})


def test_model_backend_sends_the_tick_as_typed_json_request():
    prov = ScriptedProvider([reply(json.dumps({
        "progress": {"value": "grasping", "probability": 0.8, "reason": "closing"},
        "held": {"probability": 0.2, "reason": "not yet"}}))])
    be = ModelVisionBackend(prov)
    assert isinstance(be, VisionBackend)
    rep = be.answer_tick(request(images=(img("reference", reference=True), img("previous"),
                                         img("current", marked=True)), marked=True,
                                 reference=True), timeout_s=9)
    req = prov.calls[0].request
    assert req.purpose == "monitor" and req.response_schema is not None
    assert is_strict_schema(req.response_schema)
    assert req.response_schema["properties"]["progress"]["properties"]["value"]["enum"] == [
        "approaching", "grasping", "holding", "failed"]
    assert "trust the frame over the mark" in req.system
    assert "planner pointed" in req.system and "Grey fingers" in req.system
    texts = [p.text for p in req.messages[0].content if hasattr(p, "text")]
    assert "[wrist close-up, previous, 1.5 s ago]" in texts
    assert "[wrist close-up, current]" in texts
    assert any("reference" in t for t in texts)
    assert '"gripper"' in texts[0] and "running 3.0 s" in texts[0]
    assert "Reply with exactly this JSON" in texts[-1]  # asked in words too
    assert rep.answers["progress"].value == "grasping"
    held = rep.answers["held"]
    assert (held.value, held.probability, held.p_true) == ("false", 0.8, 0.2)


def test_model_backend_untyped_still_asks_for_the_json():
    prov = ScriptedProvider([reply('```json\n{"held": {"probability": 0.9, "reason": ""}}\n```'
                                   )])
    be = ModelVisionBackend(prov, typed=False)
    rep = be.answer_tick(request(questions=(question_from_dict({"name": "held"}),)),
                         timeout_s=9)
    assert prov.calls[0].request.response_schema is None
    assert rep.answers["held"].value == "true"


def test_bad_answers_are_left_out_with_a_reason():
    prov = ScriptedProvider([reply(json.dumps({
        "progress": {"value": "flying", "probability": 0.9, "reason": ""},
        "held": {"probability": 1.7, "reason": ""}}))])
    rep = ModelVisionBackend(prov).answer_tick(request(), timeout_s=9)
    assert rep.answers == {}
    assert any("flying" in p for p in rep.problems) and any("1.7" in p for p in rep.problems)


def test_non_json_and_errors_raise_model_errors():
    with pytest.raises(ModelError) as e:
        extract_json("no json here")
    assert e.value.kind == "malformed"
    prov = ScriptedProvider([ModelError("rate_limited", "slow down")])
    with pytest.raises(ModelError):
        ModelVisionBackend(prov).answer_tick(request(), timeout_s=1)


def test_describe_is_a_vision_call_without_retries_or_schema():
    prov = ScriptedProvider([reply("A red cup left of the tray.")])
    d = ModelVisionBackend(prov).describe(FrameForVision(b"img", "image/png", 4, 3, "cam"),
                                          "where is the cup", timeout_s=5)
    req = prov.calls[0].request
    assert req.purpose == "vision" and req.response_schema is None
    assert "where is the cup" in req.messages[0].text()
    assert d.text == "A red cup left of the tray."


def test_answer_schema_predicate_shape():
    s = answer_schema([question_from_dict({"name": "held"})])
    assert s["properties"]["held"]["required"] == ["probability", "reason"]


# -- cv -----------------------------------------------------------------------------------------

def tick_images(tick_id):
    row = next(json.loads(line) for line in (TICKS / "ticks.jsonl").read_text().splitlines()
               if json.loads(line)["id"] == tick_id)
    out = []
    for rec in row["images"]:
        px = cv2.imread(str(TICKS / rec["file"]))
        out.append(MonitorImage("wrist", rec["label"], rec["age_s"], b"", "image/png",
                                px.shape[1], px.shape[0], px, True))
    return tuple(out)


@pytest.mark.parametrize("tick,value", [("pick01_t01", "approaching"),
                                        ("pick01_t06", "holding"),
                                        ("pick03_t13", "failed"),
                                        ("pick02_t04", "grasping")])
def test_cv_answers_progress_from_the_pixels(tick, value):
    be = CvVisionBackend()
    rep = be.answer_tick(request(questions=(question_from_dict(PROGRESS),),
                                 images=tick_images(tick)), timeout_s=1)
    a = rep.answers["progress"]
    assert a.value == value and 0.5 <= a.probability <= 1.0


def test_cv_held_released_and_unknown_questions():
    be = CvVisionBackend()
    qs = tuple(question_from_dict(d) for d in (
        {"name": "held"}, {"name": "released"}, {"name": "cup_is_blue"},
        {"name": "mood", "type": "choice", "choices": ["happy", "sad"]}))
    holding = be.answer_tick(request(questions=qs, images=tick_images("pick01_t07")),
                             timeout_s=1)
    assert holding.answers["held"].value == "true" and holding.answers["held"].probability > 0.8
    assert holding.answers["released"].value == "false"
    assert "cup_is_blue" not in holding.answers and "mood" not in holding.answers
    assert len(holding.problems) == 2
    empty = be.answer_tick(request(questions=qs[:1], images=tick_images("pick05_t13")),
                           timeout_s=1)
    assert empty.answers["held"].value == "false"


def test_cv_gives_no_answer_without_fingers_in_view():
    be = CvVisionBackend()
    px = np.full((100, 100, 3), (178, 200, 215), np.uint8)
    blank = MonitorImage("wrist", "current", 0.0, b"", "image/png", 100, 100, px, True)
    rep = be.answer_tick(request(images=(blank,)), timeout_s=1)
    assert rep.answers == {}


def test_cv_ignores_the_target_mark():
    from solarian_agent.core.monitor import draw_mark

    px = tick_images("pick01_t06")[1].pixels
    marked = draw_mark(px, (120, 20, 260, 170))
    a, b = measure(px), measure(marked, marked=True)
    assert abs(a.gap - b.gap) <= 2 and a.object_width == b.object_width
    assert abs(a.fill - b.fill) < 0.02 and a.object_area == pytest.approx(b.object_area, 0.02)


def test_cv_describe_reports_measurements():
    px = tick_images("pick01_t06")[1].pixels
    d = CvVisionBackend().describe(FrameForVision(b"", "image/png", px.shape[1], px.shape[0],
                                                  "wrist", px), "the cup", timeout_s=1)
    assert "red region" in d.text and "not a model" in d.text and "jaws" in d.text
