"""The climb's world: a sample project with a slow function (`sample`), and the `optimiser` responder
that proposes good, neutral and gaming changes to it (`ideas`, `responder`)."""

from hilbert.sim.optimiser.responder import OptimiserResponder

__all__ = ["OptimiserResponder"]
