"""The `reviewer` policy of the fake server: a simulated code reviewer for the review panel
(`hilbert.judge.panel`), which reads the fenced diff and reports findings by simple rules.

    policy = ReviewerPolicy.from_options({"mode": "narrow"})   # or: FakeServer("reviewer")
    reply = policy.reply(conversation)

`policy.py` holds the diff parser (`parse_diff`: hunks with new-file line numbers), the rules
(`review_findings`) and how a model name varies them (lax, noisy, narrow, broken).
"""

from hilbert.testing.reviewer.policy import Hunk, ReviewerPolicy, parse_diff, review_findings

__all__ = ["Hunk", "ReviewerPolicy", "parse_diff", "review_findings"]
