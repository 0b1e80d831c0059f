"""Profile templates: the one jinja2 sandbox every profile (BIOS and host OS) renders in (with a render budget,
numaforge.budgeted), and the helpers that
turn a template or a rendered document into errors naming file:line.

A basic module: numaforge.bios.profile and numaforge.hostos.profile both render through it, so neither pipeline
reaches into the other's internals. Templates are data: ImmutableSandboxedEnvironment (no method that reaches
Python internals, no mutation of facts) with StrictUndefined (a misspelled fact is an error).
"""

from __future__ import annotations

import difflib
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from . import budgeted, safeio, yamlsrc
from .errors import ProfileError
from .safeio import file_stamp

SUFFIX = ".yaml.j2"
MAX_PROFILE_BYTES = 1024 * 1024  # a profile template (safeio.check_input's cap)


def host_facts(host) -> dict[str, Any]:
    """The facts a profile renders over, from an inventory Host (numaforge.inventory.model.Host)."""
    hw = host.hardware
    vendor = hw.vendor or (host.bmc.vendor if host.bmc and host.bmc.vendor != "auto" else None)
    return {
        "host": host.name,
        "vendor": vendor or "generic",
        "model": hw.platform or "",
        "sockets": hw.sockets or 1,
        "cpu_model": hw.cpu_model or "",
        "gpus": list(hw.gpus),
        "gpu_count": len(hw.gpus),
        "nics": list(hw.nics),
        "nic_count": len(hw.nics),
        "groups": list(host.groups),
        "vars": dict(host.vars),
    }


def find_template(name: str, dirs: Sequence[Path], kind: str) -> Path:
    """A profile name (``epyc-gpudirect``: ``<dir>/<name>.yaml.j2``, first of ``dirs``) or a path to a file;
    ``kind`` ("BIOS profile", "host profile") names it in errors."""
    if name.endswith((".j2", ".yaml", ".yml")) or "/" in name:
        p = Path(name)
        if p.is_file():
            return p
        if os.path.lexists(p):  # there, but a directory, a device, a FIFO, a dangling link: say which
            safeio.check_input(
                p, what=kind, error=ProfileError, max_bytes=MAX_PROFILE_BYTES, fix_kind="name a .yaml.j2 file"
            )
        raise ProfileError(f"{kind} file {name} does not exist", name, "check the path")
    for d in dirs:
        p = d / f"{name}{SUFFIX}"
        if p.is_file():
            return p
    known = sorted({f.name[: -len(SUFFIX)] for d in dirs for f in d.glob(f"*{SUFFIX}")})
    close = difflib.get_close_matches(name, known, n=1)
    fix = f"did you mean '{close[0]}'?" if close else f"known profiles: {', '.join(known) or 'none'}"
    raise ProfileError(f"unknown {kind} '{name}'", ", ".join(str(d) for d in dirs), fix)


def template_line(exc: BaseException, filename: str | None) -> int | None:
    """The template line an error happened on: jinja2's own lineno, else the last traceback frame in the
    compiled template's file."""
    line = getattr(exc, "lineno", None)
    if line:
        return line
    tb = exc.__traceback__
    found = None
    while tb is not None:
        if filename is not None and tb.tb_frame.f_code.co_filename == filename:
            found = tb.tb_lineno
        tb = tb.tb_next
    return found


class _StatLoader(jinja2.FileSystemLoader):
    """FileSystemLoader whose cached templates are reused only while the file keeps its inode, size and
    nanosecond mtime (jinja2's own check compares float seconds)."""

    def get_source(self, environment, template):
        for base in self.searchpath:  # the one checked reader first: a profile is a small regular file
            candidate = os.path.join(base, template)
            if os.path.lexists(candidate):
                safeio.check_input(
                    candidate,
                    what="profile",
                    error=ProfileError,
                    max_bytes=MAX_PROFILE_BYTES,
                    fix_kind="a profile is a regular .yaml.j2 file",
                    fix_size="a profile is a hand-written template of a few KiB",
                )
                break
        source, filename, _uptodate = super().get_source(environment, template)
        stamp = file_stamp(filename)

        def uptodate() -> bool:
            return file_stamp(filename) == stamp

        return source, filename, uptodate


_ENVIRONMENTS: dict[str, ImmutableSandboxedEnvironment] = {}
_ENV_LOCK = threading.Lock()


def template_environment(directory: str) -> ImmutableSandboxedEnvironment:
    """The sandbox every profile template renders in: one environment per profile directory and process, so a
    template is compiled once per run (a fleet renders it once per host, with its facts)."""
    with _ENV_LOCK:
        env = _ENVIRONMENTS.get(directory)
        if env is None:
            env = _ENVIRONMENTS[directory] = budgeted.BudgetedSandbox(
                loader=_StatLoader(directory),
                undefined=jinja2.StrictUndefined,
                keep_trailing_newline=True,
                trim_blocks=True,
                lstrip_blocks=True,
                autoescape=False,
                auto_reload=True,
            )
        return env


def render_file(path: Path, facts: dict[str, Any], kind: str = "profile") -> str:
    """Render one template file over ``facts`` in the sandbox; every failure is a ProfileError with file:line."""
    env = template_environment(str(path.parent))
    if not os.access(path, os.R_OK):
        raise ProfileError(f"cannot read {kind}", str(path), "check the file and its permissions")
    try:
        template = env.get_template(path.name)
    except UnicodeDecodeError as exc:
        raise not_utf8(exc, path, kind) from None
    except jinja2.TemplateSyntaxError as exc:
        raise ProfileError(
            f"template syntax error: {exc.message}", f"{path}:{exc.lineno}", "fix the Jinja2 syntax at that line"
        ) from None
    except (OSError, jinja2.TemplateNotFound):
        raise ProfileError(f"cannot read {kind}", str(path), "check the file and its permissions") from None
    try:
        return budgeted.render(template, facts)
    except UnicodeDecodeError as exc:  # an {% include %}d or {% import %}ed template that is not UTF-8
        raise ProfileError(
            f"a template this {kind} includes is not UTF-8 text: {exc.reason} at byte offset {exc.start}",
            _at(path, template_line(exc, template.filename)),
            "save every profile template as UTF-8 (e.g. iconv -f latin1 -t utf-8 FILE)",
        ) from None
    except budgeted.RenderBudgetExceeded as exc:
        raise ProfileError(
            f"profile went past its render budget: {exc}",
            _at(path, template_line(exc, template.filename)),
            "a profile computes a few settings from facts: remove the large loop, range or repetition",
        ) from None
    except EXPRESSION_ERRORS as exc:
        raise _expression_error(exc, _at(path, template_line(exc, template.filename))) from None
    except SecurityError as exc:
        raise ProfileError(
            f"profile tried something the template sandbox forbids ({exc})",
            _at(path, template_line(exc, template.filename)),
            "a profile may only read facts and compute values: remove the attribute/method access",
        ) from None
    except jinja2.UndefinedError as exc:
        raise ProfileError(
            f"template uses an undefined value: {exc.message}",
            _at(path, template_line(exc, template.filename)),
            f"profiles can use: {', '.join(sorted(facts))} (guard optional ones with `is defined`)",
        ) from None
    except jinja2.TemplateError as exc:
        raise ProfileError(
            f"template failed: {exc}", _at(path, template_line(exc, template.filename)), "fix the template expression"
        ) from None


def not_utf8(exc: UnicodeDecodeError, path: Path, kind: str = "profile") -> ProfileError:
    """A template file that is not UTF-8: the file, its line and the byte offset of the first bad byte."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(exc.start)
    except OSError:
        head = b""
    line = head.count(b"\n") + 1 if len(head) == exc.start else None
    bad = exc.object[exc.start : exc.start + 1].hex() if isinstance(exc.object, bytes) else "?"
    return ProfileError(
        f"{kind} is not UTF-8 text: byte 0x{bad} at byte offset {exc.start} ({exc.reason})",
        _at(path, line),
        f"save it as UTF-8 (e.g. iconv -f latin1 -t utf-8 {path} > {path.name}.new, then check and rename it)",
    )


def extends_error(exc: ProfileError, parent: str, child: Path, doc, kind: str = "profile") -> ProfileError:
    """The error for a parent profile that cannot be found: at the child's ``extends:`` line (file:line), not
    at the directory that was searched (that goes into the message)."""
    try:
        source = child.read_text(errors="replace").splitlines()
    except OSError:
        source = []
    # the template's own line when one line says `extends:` (rendering moves lines: a {# comment #} line, blocks)
    at = [n for n, text in enumerate(source, 1) if re.match(r"\s*extends\s*:", text)]
    named = [n for n in at if parent in source[n - 1]]
    line = doc.line_of("extends") if isinstance(doc, yamlsrc.LMap) else None
    if len(named) == 1 or len(at) == 1:
        where = f"{child}:{(named or at)[0]}"
    else:
        where = f"{child} (rendered line {line})" if line else str(child)
    looked = f" (looked in {exc.where})" if exc.where else ""
    return ProfileError(
        f"`extends: {parent}` names an unknown {kind}{looked}",
        where,
        f"{exc.fix}; or fix the `extends:` line" if exc.fix else "fix the `extends:` line",
    )


# what a template expression can raise from Python itself ({{ 4 // 0 }}, {{ 'a' + 1 }}, a macro calling itself):
# the template's fault, said with its file:line -- these were "internal error (a bug)" exits (issue 25 item 8)
EXPRESSION_ERRORS = (ArithmeticError, RecursionError, TypeError, ValueError, LookupError)


def _expression_error(exc: BaseException, where: str) -> ProfileError:
    """The ProfileError for a template expression Python refused (division by zero, endless recursion...)."""
    if isinstance(exc, RecursionError):
        what = "a macro or loop in the profile calls itself without end (RecursionError)"
        fix = "give the recursive macro a condition that stops it, or compute the value without recursion"
    elif isinstance(exc, ZeroDivisionError):
        what = f"the profile divides by zero ({exc})"
        fix = "guard the divisor (e.g. {% if n %}...{% endif %}) or check the fact it comes from"
    else:
        what = f"a template expression failed: {type(exc).__name__}: {exc}"
        fix = "fix the expression at that line (types: facts are numbers, strings, lists and mappings)"
    return ProfileError(what, where, fix)


def _at(path: Path, line: int | None) -> str:
    return f"{path}:{line}" if line else str(path)


def rendered_locator(text: str, path: Path) -> Callable[[int], str]:
    """``locate(line)`` for errors in rendered text: the template file, the rendered line and its content."""
    rendered = text.splitlines()

    def locate(line: int) -> str:
        snippet = rendered[line - 1].strip() if 0 < line <= len(rendered) else ""
        return f"{path} (rendered line {line}: {snippet!r})"

    return locate


def parse_rendered_yaml(text: str, path: Path, kind: str = "profile"):
    """The rendered text as LMap/LSeq (numaforge.yamlsrc: duplicate keys refused, lines kept) or None if empty."""
    return yamlsrc.parse(
        text,
        str(path),
        error=ProfileError,
        locate=rendered_locator(text, path),
        syntax=f"rendered {kind} is not valid YAML",
    )


def key_lines(doc) -> dict[tuple, int]:
    """Line (1-based, in the rendered text) of every mapping key path, for error messages."""
    lines: dict[tuple, int] = {}

    def walk(node, path: tuple):
        if isinstance(node, yamlsrc.LMap):
            for k, v in node.items():
                lines[path + (str(k),)] = node.line_of(k)
                walk(v, path + (str(k),))

    walk(doc, ())
    return lines
