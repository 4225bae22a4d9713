"""`hilbert web`'s guard with a plain client (Starlette's test client, no browser): every endpoint —
the page, its assets, the data, the event stream, the transcript, the actions — refuses a request
without the token, or whose Host is not the server's own; the token in the URL becomes an HttpOnly,
SameSite=Strict cookie; an action needs the server's own Origin, and GET never acts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from hilbert.store import EventStore
from hilbert.ui.web import make_app
from hilbert.ui.web_guard import Guard, Refusal

PORT = 8765
TOKEN = "the-token"
ORIGIN = f"http://127.0.0.1:{PORT}"
GETS = ["/", "/assets/app.js", "/assets/app.css", "/api/view", "/api/events", "/api/transcript?agent=Ada"]
POSTS = ["/api/send", "/api/stop", "/api/approve"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    with EventStore.open(tmp_path / "log.db") as store:
        store.append("r", "Ada", "agent_started", {"task": "T1", "model": "m", "tools": []})
        yield store


def client(store: EventStore, host: str = f"127.0.0.1:{PORT}") -> TestClient:
    app = make_app(store, "r", Guard(TOKEN, PORT))
    return TestClient(app, base_url=f"http://{host}", follow_redirects=False)


def signed_in(store: EventStore) -> TestClient:
    web = client(store)
    web.cookies.set(f"hilbert_web_{PORT}", TOKEN)
    return web


def person_events(store: EventStore) -> list[tuple[str, dict[str, object]]]:
    return [(e.kind, e.data) for e in store.events(run="r") if e.agent == "person"]


def status(refusal: Refusal | None) -> int:
    return 200 if refusal is None else refusal.status


def test_the_pure_check_in_its_order_host_then_token_then_origin() -> None:
    guard = Guard(TOKEN, PORT)
    host = f"localhost:{PORT}"
    assert guard.refusal("GET", host, None, TOKEN, None) is None
    assert guard.refusal("GET", host, None, None, TOKEN) is None
    assert status(guard.refusal("GET", f"evil.example:{PORT}", None, TOKEN, None)) == 403
    assert status(guard.refusal("GET", "127.0.0.1:1", None, TOKEN, None)) == 403
    assert status(guard.refusal("GET", host, None, TOKEN + "x", "nope")) == 401
    assert guard.refusal("POST", host, f"http://{host}", None, TOKEN) is None
    assert status(guard.refusal("POST", host, None, None, TOKEN)) == 403
    assert status(guard.refusal("POST", host, ORIGIN, None, TOKEN)) == 403


def test_every_endpoint_refuses_a_request_without_the_token_or_with_a_wrong_one(store: EventStore) -> None:
    web = client(store)
    for path in GETS:
        answer = web.get(path)
        assert answer.status_code == 401, path
        assert answer.text.startswith("refused: no valid token")
    web.cookies.set(f"hilbert_web_{PORT}", "not-the-token")
    for path in GETS:
        assert web.get(path).status_code == 401, path
    for path in POSTS:
        body = {"agent": "Ada", "text": "hi", "proposal": "P1"}
        answer = web.post(path, json=body, headers={"origin": ORIGIN})
        assert answer.status_code == 401, path
    assert person_events(store) == []


def test_the_token_in_the_url_becomes_a_strict_http_only_cookie_and_the_page_loads(store: EventStore) -> None:
    web = client(store)
    answer = web.get(f"/?token={TOKEN}")
    assert answer.status_code == 303 and answer.headers["location"] == "/"  # the token leaves the address
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"hilbert_web_{PORT}={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    web.cookies.set(f"hilbert_web_{PORT}", TOKEN)
    page = web.get("/")
    assert page.status_code == 200 and '<script src="/assets/app.js"' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert web.get("/assets/app.js").headers["content-type"].startswith("text/javascript")
    assert web.get("/api/view").json()["agents"][0]["name"] == "Ada"
    assert web.get("/assets/../web.py").status_code == 404
    assert web.get("/api/transcript?agent=Ada&after=x").status_code == 400
    lines = web.get("/api/transcript?agent=Ada").json()["lines"]
    assert len(lines) == 1 and "Ada" in lines[0][1]


def test_a_foreign_host_is_refused_even_with_the_token(store: EventStore) -> None:
    for host in (f"evil.example:{PORT}", "127.0.0.1", f"127.0.0.1:{PORT + 1}"):
        web = client(store, host)
        web.cookies.set(f"hilbert_web_{PORT}", TOKEN)
        for path in [*GETS, f"/?token={TOKEN}"]:
            answer = web.get(path)
            assert answer.status_code == 403, (host, path)
            assert "not this server's" in answer.text
    assert client(store, f"localhost:{PORT}").get(f"/?token={TOKEN}").status_code == 303


def test_an_action_needs_the_servers_own_origin_and_get_never_acts(store: EventStore) -> None:
    web = signed_in(store)
    message = {"agent": "Ada", "text": "look at T2"}
    for origin in (None, "http://evil.example", f"http://localhost:{PORT + 1}", "null"):
        headers = {"origin": origin} if origin else {}
        answer = web.post("/api/send", json=message, headers=headers)
        assert answer.status_code == 403, origin
    for path in POSTS:
        assert web.get(path, params=message).status_code == 405
    assert person_events(store) == []
    answer = web.post("/api/send", json=message, headers={"origin": ORIGIN})
    assert answer.status_code == 200, answer.text
    assert answer.json()["said"] == "sent to Ada (run r); it reads it before its next model call"
    assert person_events(store) == [("person_message", {**person_events(store)[0][1], "to": "Ada"})]
    assert person_events(store)[0][1]["text"] == "look at T2"
    bad = web.post("/api/send", json={"agent": "Nobody", "text": "x"}, headers={"origin": ORIGIN})
    assert bad.status_code == 400 and bad.json()["error"].startswith("no agent 'Nobody' in run r")


def test_stop_and_approve_from_the_page_record_what_their_commands_record(store: EventStore) -> None:
    web = signed_in(store)
    stopped = web.post("/api/stop", json={"agent": "Ada"}, headers={"origin": ORIGIN})
    assert stopped.status_code == 200, stopped.text
    assert stopped.json()["said"].startswith("stop requested for Ada (run r)")
    assert person_events(store) == [("stop_requested", {"to": "Ada"})]
    nothing = web.post("/api/approve", json={"proposal": "P9"}, headers={"origin": ORIGIN})
    assert nothing.status_code == 400 and "P9" in nothing.json()["error"]
    everyone = web.post("/api/stop", json={"agent": None}, headers={"origin": ORIGIN})
    assert everyone.json()["said"].startswith("stop requested for every agent")
    assert person_events(store)[-1] == ("stop_requested", {"to": "*"})


def test_another_local_apps_cookie_beside_ours_does_not_lock_the_person_out(store: EventStore) -> None:
    # cookies are shared between a host's ports: other apps on localhost set their own, often with
    # JSON, spaces or quotes in the value, which browsers send before ours
    web = client(store)
    ours = f"hilbert_web_{PORT}={TOKEN}"
    for theirs in ('prefs={"theme":"dark"}', "greeting=hello there", 'half="quoted'):
        answer = web.get("/api/view", headers={"cookie": f"{theirs}; {ours}"})
        assert answer.status_code == 200, (theirs, answer.text)
        assert web.get("/api/view", headers={"cookie": theirs}).status_code == 401


def test_odd_input_to_an_endpoint_is_a_400_with_its_reason_never_a_server_error(store: EventStore) -> None:
    web = signed_in(store)
    for agent in (5, ["Ada"], {"name": "Ada"}, "", []):  # not null: never "stop the whole run"
        answer = web.post("/api/stop", json={"agent": agent}, headers={"origin": ORIGIN})
        assert answer.status_code == 400, (agent, answer.text)
        assert answer.json()["error"].startswith("the action needs agent")
    assert person_events(store) == []
    for after in ("99999999999999999999999", "²", "-1"):  # past SQLite's integers; a digit int() refuses
        answer = web.get("/api/transcript", params={"agent": "Ada", "after": after})
        assert answer.status_code == 400, (after, answer.text)
        assert answer.json()["error"].startswith("after: an event id")


def test_a_host_named_with_capitals_is_let_in_as_the_browser_sends_it() -> None:
    guard = Guard(TOKEN, PORT, "Studio.LAN")  # `hilbert web --host Studio.LAN`: browsers lowercase it
    assert guard.refusal("GET", f"studio.lan:{PORT}", None, TOKEN, None) is None
    assert guard.refusal("POST", f"studio.lan:{PORT}", f"http://studio.lan:{PORT}", TOKEN, None) is None
    assert status(guard.refusal("GET", f"studio.lan.evil.example:{PORT}", None, TOKEN, None)) == 403


def test_the_redirect_that_drops_the_token_stays_on_this_server(store: EventStore) -> None:
    # the path is the client's: `//host/` in a Location is another site, and a raw CR/LF split the header
    web = client(store)
    odd = [("//evil.example/", "/evil.example/"), ("/a%0d%0aX-Evil:%201", "/a%0D%0AX-Evil%3A%201")]
    for path, stays_at in odd:
        answer = web.get(f"{ORIGIN}{path}?token={TOKEN}")
        assert answer.status_code == 303 and answer.headers["location"] == stays_at
        assert "x-evil" not in answer.headers
