"""Keeping a fleet from being turned against itself (issue 5; design: docs/design/security.md).

So far: `envelope` — how a message reaches an agent (an envelope stating the sender and role as the
harness knows them, the text escaped so it cannot forge one) and the keyed signature every stored
message carries. `safe_open` — opening a file beneath a folder (openat2 `RESOLVE_BENEATH`, or an
`O_NOFOLLOW` walk) so that nothing planted in a workspace leads the harness's file tools out of it.
"""
