"""A page's long <select> lists (a kernel's siblings, a run's comparable runs: hundreds of options),
made in Python: a template loop took about 0.2 ms an option, 100 ms for the kernel page's 500."""

from __future__ import annotations

from collections.abc import Iterable

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe


def select_options(choices: Iterable[tuple[int, str]], selected: int | None) -> SafeString:
    """`<option>`s of (primary key, label) pairs, `selected` marked; every label escaped."""
    options = (
        f'<option value="{int(pk)}"{" selected" if pk == selected else ""}>{escape(label)}</option>'
        for pk, label in choices
    )
    return mark_safe("".join(options))  # noqa: S308 - every label escaped above; keys are integers
