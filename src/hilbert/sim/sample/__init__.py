"""Sample projects for demos and tests: a small Python package with pytest tests and injected bugs.

from hilbert.sim.sample import generate_sample_project
project = generate_sample_project(tmp_path / "proj", seed=7, bugs=1)
project.task          # what to tell an agent
project.bugs          # where the bugs are: for tests and summaries only, never for an agent
generate_sample_project(dest, seed, bugs=24, modules=12, paired=1)  # bigger; a pair on adjacent lines
"""

from hilbert.sim.sample.generator import Bug, SampleProject, generate_sample_project
from hilbert.sim.sample.mutations import OPERATORS, Rewrite, rewrites

__all__ = ["OPERATORS", "Bug", "Rewrite", "SampleProject", "generate_sample_project", "rewrites"]
