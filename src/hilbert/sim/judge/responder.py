"""`JudgeResponder`: the fake server's simulated judge, answering the gate's prompt with a JSON verdict.

It decides from the prompt alone, as a careful judge would on this evidence:

- any harness step marked FAIL → `not_done`, quoting the failed steps;
- a diff that changes only test files → `not_done` (the code under test is unchanged);
- added lines that address the judge or a reviewer (an attempt to steer the verdict) → `not_done`;
- otherwise `done`.

Options (spec `judge[:key=value,...]`):
- `gullible=true` obeys the data instead: any "verdict: X" / "answer X" written in the fenced text
  decides (the gate must still refuse to accept over a failed check);
- `garbage=true` answers with text that is not JSON (the gate must not accept on no verdict).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from hilbert.errors import UserError
from hilbert.testing.fake_server.responder import Conversation, Reply

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_STEP = re.compile(r"^- (PASS|FAIL) (\w+): (.*)$", re.MULTILINE)
_FENCE = re.compile(r"^<<<DATA (\w+) (.*?)>>>\n(.*?)\n<<<END \1>>>$", re.MULTILINE | re.DOTALL)
_ORDER = re.compile(
    r"\b(?:verdict|answer|respond|reply)\W{0,3}(?:is\W{0,3}|with\W{0,3})?(done|not_done|impossible)\b", re.I
)
_ADDRESSING = re.compile(r"\b(judge|reviewer|grader|evaluator|verdict)\b", re.I)
_TEST_PATH = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*\.py$|_test\.py$|(^|/)conftest\.py$")


@dataclass(frozen=True)
class JudgeResponder:
    gullible: bool = False
    garbage: bool = False
    name = "judge"  # a class attribute, not a field

    @classmethod
    def from_options(cls, options: Mapping[str, str], seed: int) -> JudgeResponder:
        hint = "judge, judge:gullible=true or judge:garbage=true"
        unknown = set(options) - {"gullible", "garbage"}
        if unknown:
            raise UserError(f"responder 'judge' has no option {', '.join(sorted(unknown))}", hint=hint)
        flags = {}
        for key in ("gullible", "garbage"):
            value = options.get(key, "false").strip().lower()
            if value not in _TRUE + _FALSE:
                raise UserError(f"judge: {key}={value!r} is not true or false", hint=hint)
            flags[key] = value in _TRUE
        return cls(**flags)

    def reply(self, conversation: Conversation) -> Reply:
        if self.garbage:
            return Reply(text="Looks fine to me, ship it!")
        prompt = next((m.content for m in reversed(conversation.messages) if m.role == "user"), "")
        fenced = {label: body for _nonce, label, body in _FENCE.findall(prompt)}
        verdict, reasons = self.decide(prompt, fenced)
        return Reply(text=json.dumps({"verdict": verdict, "reasons": reasons}))

    def decide(self, prompt: str, fenced: Mapping[str, str]) -> tuple[str, list[str]]:
        if self.gullible:
            for body in fenced.values():
                if ordered := _ORDER.search(body):
                    return ordered.group(1).lower(), ["the change says so"]
        evidence = prompt.split("# The agent's claim", 1)[0]  # harness text only, never fenced data
        failed = [
            f"the {name} step failed ({summary})"
            for mark, name, summary in _STEP.findall(evidence)
            if mark == "FAIL"
        ]
        if failed:
            return "not_done", failed
        diff = fenced.get("diff", "")
        changed = re.findall(r"^\+\+\+ b/(.+)$", diff, re.MULTILINE)
        if changed and all(_TEST_PATH.search(path) for path in changed):
            return "not_done", ["the change edits only tests; the code under test is unchanged"]
        steering = [
            line[1:].strip()
            for line in diff.splitlines()
            if line.startswith("+") and not line.startswith("+++") and _ADDRESSING.search(line)
        ]
        if steering:
            return "not_done", [f"the change addresses its judge instead of the task: {steering[0][:120]!r}"]
        return "done", ["the harness's checks passed and the change edits the code under test"]
