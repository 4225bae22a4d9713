"""What the command line builds once, at the edge, from the settings, and passes down whole: the command
runner (`command_runner`) and the models (`models`: every one paced by the machine's governor)."""

from __future__ import annotations

from collections.abc import Mapping

from hilbert.commands import Limits, Runner, Slots, command_env
from hilbert.commands.groups import CommandGroups
from hilbert.errors import UserError
from hilbert.models import PriceTable, make_model
from hilbert.models.governor import FallbackModel, Governor, check_fallbacks, governor_from
from hilbert.models.types import Model
from hilbert.security.sandbox import INSTALL_HINT, detect
from hilbert.settings import Settings

# Options for the person's own pytest runs — a report file outside the sandbox, a `-k` filter — would
# break or empty every test run the workers, the judge and the merge queue make (a CI job's junit file
# did: 27 failures). A project's options live in its configuration or in its test command. Beside it,
# what a pytest that runs hilbert sets for its own tests (a conftest may name ports or databases by
# the xdist worker), which each pytest the commands start sets afresh.
PERSONS_OWN = frozenset(
    {
        "PYTEST_ADDOPTS",
        "PYTEST_CURRENT_TEST",
        "PYTEST_VERSION",
        "PYTEST_XDIST_WORKER",
        "PYTEST_XDIST_WORKER_COUNT",
        "PYTEST_XDIST_TESTRUNUID",
    }
)


def command_runner(
    settings: Settings, env: Mapping[str, str] | None = None, *, refuse_without_sandbox: bool = False
) -> Runner:
    """The one runner every command of this invocation goes through, built from the settings: the best
    sandbox this machine has (or none, by name, when the person passed --unsandboxed) with hilbert's
    home hidden, the command policy (`commands.shell_policy`), `env` (default: this process's) without
    secrets nor the person's own pytest options (`PERSONS_OWN`), the limits and slots (`commands.*`)
    and the timeouts (`timeouts.*`). A `UserError` when there is no sandbox and the person has not
    accepted running without one (hilbert fails closed, before anything has started)."""
    sandbox = detect(accept_unsandboxed=settings.unsandboxed)
    if sandbox.kind == "refuse":
        raise UserError(f"no sandbox for workers' shell commands: {sandbox.why}", hint=INSTALL_HINT)
    commands = settings.commands
    return Runner(
        sandbox.hiding(settings.home),  # hilbert's home: other runs, their keys and logs
        {name: value for name, value in command_env(env).items() if name not in PERSONS_OWN},
        limits=Limits(
            cpu_s=commands.cpu_s or None,
            memory_mb=commands.memory_mb or None,
            file_mb=commands.file_mb or None,
            processes=commands.processes or None,
            group_memory_mb=commands.group_memory_mb or None,
            groups=CommandGroups.detect(),
        ),
        timeouts=settings.timeouts,
        policy=commands.shell_policy,
        slots=Slots(commands.slots),
    )


class Models:
    """The models of one invocation, all paced by one `Governor` (the settings' `[governor]`; none when
    it is off) and priced with the settings' prices. Built once at the edge; `named` makes each."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.prices = PriceTable.default().with_overrides(settings.prices)
        self.governor: Governor | None = governor_from(settings.governor, settings.home)

    def named(self, name: str) -> Model:
        """The model `name`, with the settings' prices, timeout and retries, through the governor."""
        return make_model(
            name,
            prices=self.prices,
            timeout_s=self.settings.timeouts.model_s,
            max_attempts=self.settings.budgets.model_max_attempts,
            governor=self.governor,
        )

    def for_role(self, role: str, name: str) -> Model:
        """`name` for `role` ("worker", "lead"), then its fallback chain when the settings give one."""
        chain = self.settings.governor.fallback.get(role, ())
        if not chain:
            return self.named(name)
        return FallbackModel([self.named(name), *(self.named(other) for other in chain)])

    def check(self) -> None:
        """Refuse, in one line, a fallback chain that reaches the judge's or a reviewer's family."""
        settings = self.settings
        check_fallbacks(
            settings.governor.fallback,
            judge=settings.judge_model,
            reviewers=settings.panel.reviewers,
            families=settings.families,
        )


def models(settings: Settings) -> Models:
    """The invocation's models (see `Models`)."""
    return Models(settings)
