"""What hilbert ships for testing code that talks to a model — yours and its own.

    fake_server/        a real HTTP model server (Anthropic Messages, OpenAI Chat Completions and
                        Responses) answered by a `Responder`: scripted and echo replies ship here,
                        others register by name (the simulation's, in `hilbert.sim`)
    function_model.py   `FunctionModel`: a `Model` answered in-process by a function

Nothing here imports the simulation (`hilbert.sim`), and no production code path imports this.
"""

from hilbert.testing.function_model import FunctionModel

__all__ = ["FunctionModel"]
