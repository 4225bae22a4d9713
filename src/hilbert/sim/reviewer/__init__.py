"""The `reviewer` responder of the fake server: a simulated code reviewer for the review panel
(`hilbert.judge.panel`), which reads the fenced diff and reports findings by simple rules.

    responder = ReviewerResponder.from_options({"mode": "narrow"})   # or: FakeServer("reviewer")
    reply = responder.reply(conversation)

`responder.py` holds the diff parser (`parse_diff`: hunks with new-file line numbers), the rules
(`review_findings`) and how a model name varies them (lax, noisy, narrow, broken).
"""

from hilbert.sim.reviewer.responder import Hunk, ReviewerResponder, parse_diff, review_findings

__all__ = ["Hunk", "ReviewerResponder", "parse_diff", "review_findings"]
