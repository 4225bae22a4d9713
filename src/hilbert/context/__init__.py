"""Context economy (issue 6; design: docs/design/context.md): counting tokens offline, and (to come) the
compaction strategies, the pinned task state and the loop seam that applies them."""
