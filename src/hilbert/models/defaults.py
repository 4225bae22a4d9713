"""The defaults of a model call that `make_model` (the package) and the adapters share: the network
timeout and the reply's output cap. They live apart so that an adapter never imports the package that
imports it; `hilbert.models` re-exports them."""

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_TOKENS = 16_384
