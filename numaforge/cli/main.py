"""The `numaforge` command: Invoke's Program over the same tasks `invoke` finds in a checkout's tasks.py.

    numaforge --list                         # from any directory
    numaforge --root ~/myfleet bios-plan     # a project directory: bios/, inventory/, patches/, kpatch/targets/

Config files are Invoke's with the numaforge prefix: /etc/numaforge.yaml, ~/.numaforge.yaml and numaforge.yaml
in the project directory (``numaforge: {inventory: fleet.yaml, root: ...}``); numaforge.paths resolves data and
output locations from the project directory.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

from invoke import Argument, Collection, Config, Exit, ParseError, Program

from .. import __version__, paths
from . import __path__ as _cli_path
from . import environment, values

HELP_FLAGS = ("-h", "--help")


def namespace() -> Collection:
    """Every task of numaforge/cli/*.py (each module's ``TASKS``) in one flat collection."""
    ns = Collection()
    for info in sorted(pkgutil.iter_modules(_cli_path), key=lambda m: m.name):
        module = importlib.import_module(f"{__package__}.{info.name}")
        for t in getattr(module, "TASKS", []):
            ns.add_task(t)
    ns.configure({"numaforge": {"inventory": "lab"}})
    return ns


class NumaforgeConfig(Config):
    prefix = "numaforge"
    file_prefix = "numaforge"  # type: ignore[assignment]
    env_prefix = "NUMAFORGE_CFG"  # type: ignore[assignment]


def scan(tokens: list[str], parser_contexts) -> tuple[str | bool | None, tuple[str, str] | None]:
    """What the task part of a command line (``tokens``, after the core options) asks before invoke parses it:

    - help: the task whose help is asked -- a ``-h``/``--help`` anywhere before ``--`` is help for the task
      named last before it, also where invoke would take it as a positional or option value
      (``livepatch-unload -h``, ``--host -h``): asking for help never runs anything. True: help before any task
      name (the program's help); None: no help asked for;
    - missing: (task, option) of an option that takes a value given none (``facts --host`` at the end, ``--host --all``): invoke
      accepts that silently for a repeatable option, and the empty selection would mean every host.
    """
    body = tokens[: tokens.index("--")] if "--" in tokens else tokens
    current: str | None = None
    missing: tuple[str, str] | None = None
    pending: tuple[str, str] | None = None  # (task, option): an option that takes the next token as its value
    for token in body:
        if token in HELP_FLAGS or token.startswith("--help="):
            return current or True, None
        ctx = parser_contexts.get(current) if current else None
        if pending is not None:
            if ctx is not None and (token in ctx.flags or token in ctx.inverse_flags):
                missing = missing or pending  # another option where the value should be
            else:
                pending = None
                continue
        pending = None
        if token in parser_contexts:
            current = token
            continue
        flag = ctx.flags.get(token) if ctx is not None and "=" not in token else None
        if current is not None and flag is not None and flag.takes_value and not flag.optional:
            pending = (current, token)
    return None, missing or pending


class TaskSurface(Program):
    """The parse rules of both entry points (`numaforge`, and `invoke` over tasks.py through :func:`adopt`):

    - ``TASK -h`` / ``TASK --help`` prints the task's help and exits 0 wherever it stands among the task's
      options and values; nothing is loaded or contacted (:func:`help_request`);
    - a usage error of the command line (an unknown option or task, an option without its value) exits 2 with
      the fix, as every bad option value does (invoke's own parse errors exit 1).
    """

    def parse_tasks(self) -> None:
        # invoke's Program.parse_tasks with the scan first, over one parser: making a second would lose the
        # options' help texts (invoke's Task.get_arguments pops them)
        self.parser = self._make_parser()
        asked, missing = scan(list(self.core.unparsed), self.parser.contexts)
        if asked is True:
            self.print_help()
            raise Exit
        if asked:
            self.print_task_help(asked)
            raise Exit
        try:
            if missing:
                task, option = missing
                raise ParseError(f"{option} needs a value and was given none", self.parser.contexts[task])
            result = self.parser.parse_argv(self.core.unparsed)
        except ParseError as exc:
            raise self._usage_error(exc) from None
        self.core_via_tasks = result.pop(0)
        self._update_core_context(context=self.core[0], new_args=self.core_via_tasks.args)
        self.tasks = result

    def parse_cleanup(self) -> None:
        try:
            super().parse_cleanup()
        except ParseError as exc:  # --help NAME of an unknown task
            raise self._usage_error(exc) from None

    def _usage_error(self, exc: ParseError) -> Exit:
        ctx = getattr(exc, "context", None)
        name = getattr(ctx, "name", None)
        binary = self.binary.replace("[", "").replace("]", "")  # invoke's "inv[oke]"
        fix = f"`{binary} {name} --help` lists its options" if name else f"`{binary} --list` lists the tasks"
        what = str(exc)
        missing = list(getattr(ctx, "missing_positional_args", None) or [])
        if missing:  # invoke's "'T' did not receive required positional arguments: 'x'", said as numaforge says it
            arg = missing[0].name
            what = f"{name} needs {arg.upper()}: a value after the task name (or --{arg.replace('_', '-')} VALUE)"
            fix = f"`{binary} {name} --help` lists its options and the values of {arg.upper()}"
        return Exit(message=f"error: {what}\n  fix: {fix}", code=values.OptionValueError.exit_code)


def adopt(program: Program) -> None:
    """Give a stock invoke Program the task surface's parse rules (:class:`TaskSurface`). tasks.py calls it on
    the program the `invoke` command runs (``invoke.main.program``): invoke loads tasks.py before it parses the
    task part of the command line, so the rules hold for `invoke TASK ...` as for `numaforge TASK ...`."""
    if not isinstance(program, TaskSurface):
        program.__class__ = type(f"TaskSurface{type(program).__name__}", (TaskSurface, type(program)), {})


class NumaforgeProgram(TaskSurface):
    def core_args(self) -> list[Argument]:
        return super().core_args() + [
            Argument(
                names=("root",),
                help="project directory (bios/, inventory/, patches/, kpatch/targets/); "
                "default: $NUMAFORGE_ROOT, else the current directory",
            )
        ]

    def parse_collection(self) -> None:
        super().parse_collection()
        root = self.args.root.value
        try:  # `--root ''` is a usage error, not the current directory
            values.reject_empty({"root": root})
        except values.OptionValueError as exc:
            print(f"error: {exc.render()}", file=sys.stderr)
            raise SystemExit(exc.exit_code) from None
        try:
            if root:
                paths.set_project_dir(root)
        except paths.ProjectError as exc:  # a missing directory or a file: a usage error, not a traceback
            print(f"error: {exc.render()}", file=sys.stderr)
            raise SystemExit(exc.exit_code) from None
        if not root and environment.root_problem() is not None:
            return  # no project config to load from there: the task's preflight refuses $NUMAFORGE_ROOT (exit 2)
        self.config.set_project_location(str(paths.project_dir()))
        self.config.load_project()


program = NumaforgeProgram(
    namespace=namespace(), version=__version__, name="numaforge", binary="numaforge", config_class=NumaforgeConfig
)


def main() -> None:
    program.run()
