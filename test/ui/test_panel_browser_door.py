"""The panel's door in real headless Chromium: two viewers (two browsers), where the second
reads everything a viewer can and replays it, and still cannot act as the holder (Cancel stays
its to press); a page on another site whose forms and fetches never drive the robot; and a
page reached through a rebound DNS name that is never served."""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from ui_helpers import RecordingLink, Stepper, TriggerServer, raw_request, wait_for

from solarian_agent.core.clock import FakeClock
from solarian_agent.core.transport import Bus
from solarian_agent.models.scripted import reply
from solarian_agent.testing.harness import make_harness
from solarian_agent.ui.panel import serve_panel

pytestmark = pytest.mark.browser

# viewer B's page script: collect every string this page can read (what it keeps, GET
# /api/state, a refused lock request's answer, a second event stream of its own, the page's
# text and attributes), then replay each as the credential of every lock-guarded command
HARVEST_AND_REPLAY = """
const done = arguments[arguments.length - 1];
(async () => {
  const strings = new Set();
  const walk = (o) => {
    if (typeof o === "string") strings.add(o);
    else if (Array.isArray(o)) o.forEach(walk);
    else if (o && typeof o === "object")
      for (const [k, v] of Object.entries(o)) { strings.add(k); walk(v); }
  };
  walk(JSON.parse(JSON.stringify(S)));
  walk(await (await fetch("/api/state")).json());
  const post = (path, body) => fetch(path, { method: "POST",
    headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const refused = await post("/api/lock", { token: S.token });
  walk(await refused.json());
  await new Promise((res) => {
    const es = new EventSource("/events");
    es.onmessage = (e) => walk(JSON.parse(e.data));
    setTimeout(() => { es.close(); res(); }, 1500);
  });
  walk(document.body.innerText.split(/\\s+/));
  for (const e of document.querySelectorAll("*"))
    for (const a of e.getAttributeNames()) walk(e.getAttribute(a));
  const statuses = [];
  for (const s of strings) {
    for (const body of [{ token: s }, { client: s }, { token: s, client: s }]) {
      for (const [path, text] of [["/api/message", "pick up the cup"], ["/api/message", "/reset"],
                                  ["/api/reset", ""], ["/api/estop_reset", ""],
                                  ["/api/lock", ""]]) {
        const r = await post(path, Object.assign({ text }, body));
        statuses.push([path, s.slice(0, 40), r.status]);
      }
    }
  }
  done({ strings: [...strings], statuses, refused: refused.status });
})().catch((e) => done({ error: String(e) }));
"""


def test_second_viewer_cannot_act_as_the_holder(browser_factory, artifacts, tmp_path):
    h = make_harness([reply("waiting", ("wait", {"seconds": 30}))] * 4, log_root=tmp_path)
    with Stepper(h, max_s=300) as stepper:
        panel = serve_panel(h.bus, h.clock, "127.0.0.1", 0)
        try:
            a, b = browser_factory(), browser_factory()
            a.get(panel.url)
            wait_for(lambda: a.find_element(By.ID, "lock").get_attribute("data-mine") == "true",
                     10, "viewer A to take the free lock")
            b.get(panel.url)
            wait_for(lambda: b.find_element(By.TAG_NAME, "body").get_attribute("data-client"),
                     10, "viewer B's stream")
            wait_for(lambda: b.find_element(By.ID, "lock").text.startswith(
                "Viewing — another viewer has control"), 10, "B to be a viewer")
            assert not b.find_element(By.ID, "send").is_enabled()
            # A starts a task
            box = a.find_element(By.ID, "input")
            box.send_keys("wait for me")
            box.send_keys(Keys.ENTER)
            wait_for(lambda: h.planner.actions, 10, "A's task to start its wait")
            wait_for(lambda: b.find_elements(By.CSS_SELECTOR, '#actions li[data-tool="wait"]'),
                     10, "B to see the running wait")
            # B reads everything it can and replays it as the holder's credential
            b.set_script_timeout(120)
            out: dict[str, Any] = b.execute_async_script(HARVEST_AND_REPLAY)
            assert "error" not in out, out
            a_id = a.execute_script("return S.client")
            a_token = a.execute_script("return S.token")
            assert a_token and len(a_token) >= 32
            assert a_id in out["strings"]  # B can name the holder ...
            assert a_token not in out["strings"]  # ... but never read its credential
            assert out["refused"] == 403
            assert len(out["statuses"]) >= 15 * 20
            wrong = [s for s in out["statuses"] if s[2] != 403]
            assert not wrong, wrong[:5]
            # nothing B sent acted: the run is A's, as A left it
            assert h.planner.status == "running" and h.planner.task == "wait for me"
            assert [m["text"] for m in h.planner.conversation if m["role"] == "user"] == [
                "wait for me"]
            assert panel.hub.lock.holder == a_id
            b.save_screenshot(str(artifacts / "panel_second_viewer.png"))
            # Cancel is B's to press without the lock (a safety command)
            b.find_element(By.ID, "cancel").click()
            wait_for(lambda: h.planner.status == "cancelled" and not h.planner.actions, 10,
                     "B's cancel")
            # A still holds control and sends the next task
            box.send_keys("wait again")
            box.send_keys(Keys.ENTER)
            wait_for(lambda: h.planner.task == "wait again", 10, "A's next task")
        finally:
            panel.stop()
    assert stepper.error is None, stepper.error
    assert panel.hub.pump_errors == 0


EVIL_PAGE = """<!doctype html><html><body><h1>win a prize</h1>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe><iframe name="sink3"></iframe>
<form id="f1" method="POST" action="{panel}api/estop" enctype="text/plain" target="sink1">
  <input name='{{"reason": "x", "a": "' value='"}}'></form>
<form id="f2" method="POST" action="{panel}api/cancel" target="sink2">
  <input name="x" value="1"></form>
<form id="f3" method="POST" action="{panel}api/estop_reset" enctype="multipart/form-data"
      target="sink3"><input name="token" value="x"></form>
<script>
window.results = {{}};
document.getElementById("f1").submit();
document.getElementById("f2").submit();
document.getElementById("f3").submit();
fetch("{panel}api/estop", {{ method: "POST", mode: "no-cors",
  headers: {{ "content-type": "text/plain" }}, body: "{{}}" }})
  .then(() => window.results.nocors = "sent", (e) => window.results.nocors = String(e));
fetch("{panel}api/estop_reset", {{ method: "POST",
  headers: {{ "content-type": "application/json" }}, body: "{{}}" }})
  .then((r) => window.results.json = r.status, (e) => window.results.json = "blocked: " + e);
</script></body></html>"""


def test_a_page_on_another_site_cannot_drive_the_robot(browser, artifacts):
    bus = Bus()
    server = TriggerServer(bus)
    server.serve()
    link = RecordingLink(bus)
    with serve_panel(None, FakeClock(), "127.0.0.1", 0, link=link) as panel:
        page = EVIL_PAGE.format(panel=panel.url).encode()

        class Evil(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.send_header("content-length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args: Any) -> None:
                pass

        evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Evil)
        t = threading.Thread(target=evil.serve_forever, daemon=True)
        t.start()
        try:
            # another origin: another host name and port than the panel's
            browser.get(f"http://localhost:{evil.server_address[1]}/")
            wait_for(lambda: "json" in browser.execute_script("return window.results"), 10,
                     "the page's fetches to settle")
            results = browser.execute_script("return window.results")
            assert str(results["json"]).startswith("blocked"), results  # no CORS, ever

            def refused() -> dict[str, int]:
                code, raw, _ = raw_request(panel.url, "GET", "/api/state", b"",
                                           {"Host": f"127.0.0.1:{panel.port}"})
                return dict(json.loads(raw)["refused"])

            wait_for(lambda: sum(refused().values()) >= 4, 10,
                     "the three forms and the no-cors fetch to reach the door")
            browser.save_screenshot(str(artifacts / "panel_other_site.png"))
        finally:
            evil.shutdown()
            evil.server_close()
        assert server.requests == [] and link.sent == []
        assert refused().get("origin", 0) >= 4
    link.close()


def test_a_rebound_dns_name_is_never_served(browser_factory):
    """Chromium resolves attacker.example to this machine (as a rebinding attack makes it):
    neither the page nor a request from that origin is served."""
    bus = Bus()
    server = TriggerServer(bus)
    server.serve()
    link = RecordingLink(bus)
    d = browser_factory("--host-resolver-rules=MAP attacker.example 127.0.0.1")
    with serve_panel(None, FakeClock(), "127.0.0.1", 0, link=link) as panel:
        d.get(f"http://attacker.example:{panel.port}/")
        src = d.page_source
        assert "does not answer to that Host" in src and "E-STOP" not in src
        d.set_script_timeout(20)
        statuses = d.execute_async_script("""
            const done = arguments[arguments.length - 1];
            const post = (p) => fetch(p, { method: "POST",
              headers: { "content-type": "application/json" }, body: "{}" })
              .then((r) => r.status, (e) => String(e));
            Promise.all(["/api/estop", "/api/estop_reset", "/api/cancel"].map(post))
              .then(done);""")
        assert statuses == [421, 421, 421]
        # the same browser on the panel's own name is served
        d.get(panel.url)
        wait_for(lambda: d.find_element(By.ID, "conn").get_attribute("data-ok") == "true", 10,
                 "the event stream on 127.0.0.1")
    assert server.requests == [] and link.sent == []
    link.close()
