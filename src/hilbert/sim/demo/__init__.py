"""The scenes of `hilbert demo`: hilbert's own loop and fleet, run against the simulation's
responders over loopback, each scene checking its result itself.

    fleet.py      `hilbert demo`: a lead and a fleet of named workers fix a generated project
    single.py     `hilbert demo --single`: one agent fixes one bug (and the helpers the scenes share)
    attack.py     the last scene: a worker tries to talk another into deleting the integration repository
    context.py    the context scene: an agent whose task outgrows its context budget keeps working

Imported only by the CLI's `demo` command; it uses the CLI's own pieces (`hilbert.ui`), as a person
running the commands would.
"""
